"""The pull pipeline every reader goes through: one pull in flight ahead of the one in use.

``Consumer.iter_range`` (and so ``follow`` over sealed segments) and the Spark reader read a
range as a run of pulls. While the caller decodes and uses one answer, the broker is already
reading the next one and the network carrying it, so the two overlap instead of taking
turns. The stages are shared too: :func:`~rocketspark.client.pulling.plan_pull` plans each
request, :func:`~rocketspark.client.pulling.read_columns` decodes what comes back. Each
reader brings only its own rules: where a pull goes (``plan_at``), what to do when its broker
cannot be reached (``recover``), and what an answer means (a consumer skips a hole retention
left; the Spark source reports it as data loss).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from rocketspark.client.pulling import PullPlan, next_logical
from rocketspark.errors import ConnectError
from rocketspark.protocol.codes import ResponseCode
from rocketspark.protocol.command import RemotingCommand
from rocketspark.protocol.types import PullResult
from rocketspark.remoting.transport import Transport

PlanAt = Callable[[int], PullPlan | PullResult]  # a logical offset -> its pull, or a result known without one
Recover = Callable[[PullPlan, ConnectError], PullPlan]  # a pull that failed to connect -> the one to try instead
_GOES_ON = (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY)  # answers after which reading continues


class Pipeline:
    """Pulls of logical ``[start, end)`` (``end`` None: open-ended), each answer's successor
    sent the moment the answer arrives, before the caller looks at it."""

    def __init__(
        self, remoting: Transport, plan_at: PlanAt, *, end: int | None = None, recover: Recover | None = None
    ) -> None:
        self.remoting = remoting
        self.plan_at = plan_at
        self.end = end
        self.recover = recover
        self._ahead: tuple[PullPlan, Future[RemotingCommand]] | None = None

    def pull(self, offset: int) -> tuple[PullPlan, RemotingCommand] | PullResult:
        """The answer for ``offset``: the pull already in flight if it is for ``offset``, else a
        new one. A ConnectError goes to ``recover`` (without one, it is raised)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0].offset == offset:
            plan, future = ahead
        else:
            planned = self.plan_at(offset)
            if isinstance(planned, PullResult):
                return planned
            plan, future = planned, self._send(planned)
        while True:
            try:
                response = future.result()
                break
            except ConnectError as exc:
                if self.recover is None:
                    raise
                plan = self.recover(plan, exc)
                future = self._send(plan)
        self._send_next(plan, response)
        return plan, response

    def _send(self, plan: PullPlan) -> Future[RemotingCommand]:
        return self.remoting.invoke_async(plan.address, plan.request, plan.budget_ms)

    def _send_next(self, plan: PullPlan, response: RemotingCommand) -> None:
        """Send the pull after ``response`` now, if reading goes on past it."""
        if response.code not in _GOES_ON:
            return
        following = next_logical(plan, int(response.ext["next"]))
        if following <= plan.offset or (self.end is not None and following >= self.end):
            return
        planned = self.plan_at(following)
        if isinstance(planned, PullPlan):
            self._ahead = (planned, self._send(planned))
