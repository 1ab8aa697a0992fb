"""The epoch file: at which log offset each master epoch of this replica's log began.

Every replica keeps one (``<data_dir>/config/epochs.json``), as RocketMQ's controller mode and
Kafka's leader-epoch checkpoint do. A master appends ``(epoch, its log end)`` when it takes
office; a slave copies its master's entries as it copies the log. A replica that rejoins a
group compares its file with the master's: the last epoch they share ends, for both, at the
smaller of where each of them saw it end, and anything this replica holds past that point was
never the group's: it truncates there before it copies again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import msgspec

from broker.store.metafile import read_json, write_json_atomic

Entry = tuple[int, int]  # (epoch, start offset)


class EpochsFile(msgspec.Struct, frozen=True):
    epochs: list[tuple[Annotated[int, msgspec.Meta(ge=0)], Annotated[int, msgspec.Meta(ge=0)]]]


@dataclass
class EpochFile:
    path: Path
    entries: list[Entry] = field(default_factory=list)

    def load(self) -> None:
        data = read_json(self.path, default={"epochs": []}, shape=EpochsFile)
        self.entries = [(int(e), int(o)) for e, o in data["epochs"]]

    @property
    def last_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def begin(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` began at ``start_offset``. Taking office again in the epoch
        already recorded last (the same term, seen again) keeps where it began; an older
        epoch is refused (``Role.min_epoch`` keeps a replica from ever being asked)."""
        if self.entries and epoch <= self.entries[-1][0]:
            if epoch == self.entries[-1][0]:
                return
            raise ValueError(f"epoch {epoch} is older than the last one recorded, {self.entries[-1][0]}")
        self.entries = [e for e in self.entries if e[1] <= start_offset]
        self.entries.append((epoch, start_offset))
        write_json_atomic(self.path, {"epochs": [list(e) for e in self.entries]})

    def adopt(self, master: list[Entry], upto: int) -> None:
        """A slave takes its master's entries for the log it holds (those starting before ``upto``)."""
        mine = [(e, o) for e, o in master if o <= upto] or self.entries
        if mine != self.entries:
            self.entries = mine
            write_json_atomic(self.path, {"epochs": [list(e) for e in self.entries]})

    def truncate_after(self, offset: int) -> None:
        """Forget epochs that began after ``offset`` (the log was cut there)."""
        kept = [(e, o) for e, o in self.entries if o <= offset]
        if kept != self.entries:
            self.entries = kept
            write_json_atomic(self.path, {"epochs": [list(e) for e in self.entries]})


def common_end(mine: list[Entry], my_end: int, master: list[Entry], master_end: int) -> int:
    """Where this replica's log stops being the master's: the end of the last epoch both
    files hold, as the earlier of the two saw it end. 0 when they share no epoch."""
    master_starts = dict(master)
    shared = [e for e, _ in mine if e in master_starts]
    if not shared:
        return 0
    last = max(shared)
    mine_next = [o for e, o in mine if e > last]
    master_next = [o for e, o in master if e > last]
    mine_stop = min(mine_next) if mine_next else my_end
    master_stop = min(master_next) if master_next else master_end
    return min(mine_stop, master_stop)
