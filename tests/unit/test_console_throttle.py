"""The console's sign-in throttle, on a clock the test moves: waits double and are capped,
refused attempts are never checked, a device that signed in before is judged alone, and no
wait lasts forever."""

from __future__ import annotations

import threading

import pytest

from rocketspark.console.throttle import (
    FORGET_S,
    FREE_FAILURES,
    GLOBAL_FREE_FAILURES,
    MAX_WAIT_S,
    DeviceCookies,
    SignInThrottle,
    Throttled,
    client_key,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Checks:
    """Stands for the credentials check, counting how often it ran."""

    def __init__(self, right: bool) -> None:
        self.right, self.ran = right, 0

    def __call__(self) -> bool:
        self.ran += 1
        return self.right


def fail(throttle: SignInThrottle, address: str = "10.0.0.1", times: int = 1, device: str | None = None) -> int:
    left = -1
    for _ in range(times):
        left = throttle.attempt(address, device, Checks(False)).tries_left
    return left


def retry_after(throttle: SignInThrottle, address: str = "10.0.0.1", device: str | None = None) -> int:
    check = Checks(True)
    with pytest.raises(Throttled) as refused:
        throttle.attempt(address, device, check)
    assert check.ran == 0  # refused unchecked: a right guess during a wait learns nothing
    return refused.value.retry_after_s


def test_after_the_free_failures_each_one_doubles_the_wait_up_to_the_cap() -> None:
    clock = Clock()
    throttle = SignInThrottle(clock)
    assert [fail(throttle) for _ in range(FREE_FAILURES)] == [4, 3, 2, 1, 0]
    waits = []
    for _ in range(12):
        wait = retry_after(throttle)
        waits.append(wait)
        clock.now += wait  # waited it out: the next attempt is checked, and fails
        fail(throttle)
    assert waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    assert waits[-1] == MAX_WAIT_S  # at most one guess per 5 minutes, never a lock for good


def test_a_right_sign_in_after_a_wait_resets_the_count() -> None:
    clock = Clock()
    throttle = SignInThrottle(clock)
    fail(throttle, times=FREE_FAILURES)
    clock.now += retry_after(throttle)
    assert throttle.attempt("10.0.0.1", None, Checks(True)).right
    assert fail(throttle) == FREE_FAILURES - 1


def test_failures_count_per_address_and_an_ipv6_host_by_its_64() -> None:
    throttle = SignInThrottle(Clock())
    fail(throttle, "10.0.0.1", FREE_FAILURES)
    assert throttle.attempt("10.0.0.2", None, Checks(True)).right  # another address is not held up
    fail(throttle, "2001:db8::1", FREE_FAILURES)
    retry_after(throttle, "2001:db8::ffff:1")  # the same /64
    assert throttle.attempt("2001:db8:0:1::1", None, Checks(True)).right
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1" and client_key("2001:db8::7") == "2001:db8::/64"


def test_many_addresses_together_are_slowed_down_too() -> None:
    throttle = SignInThrottle(Clock())
    for n in range(GLOBAL_FREE_FAILURES // (FREE_FAILURES - 1)):
        fail(throttle, f"10.0.1.{n}", FREE_FAILURES - 1)  # each stays under its own limit
    fail(throttle, "10.0.2.1", GLOBAL_FREE_FAILURES % (FREE_FAILURES - 1))
    with pytest.raises(Throttled, match="too many wrong sign-ins to this console from everywhere"):
        throttle.attempt("10.0.3.1", None, Checks(True))  # a fresh address
    assert throttle.attempt("10.0.3.1", "device-1", Checks(True)).right  # a known browser is not held up


def test_a_browser_that_signed_in_before_is_judged_by_its_own_failures_only() -> None:
    throttle = SignInThrottle(Clock())
    fail(throttle, "127.0.0.1", FREE_FAILURES)  # a guesser sharing the admin's address
    retry_after(throttle, "127.0.0.1")
    assert throttle.attempt("127.0.0.1", "admin-laptop", Checks(True)).right
    fail(throttle, "127.0.0.1", FREE_FAILURES, device="stolen-cookie")  # a device is limited like an address
    with pytest.raises(Throttled, match="from this browser"):
        throttle.attempt("127.0.0.1", "stolen-cookie", Checks(True))


def test_counts_are_forgotten_after_a_quiet_while() -> None:
    clock = Clock()
    throttle = SignInThrottle(clock)
    fail(throttle, times=FREE_FAILURES)
    retry_after(throttle)
    clock.now += FORGET_S + 1
    assert fail(throttle) == FREE_FAILURES - 1


def test_concurrent_guesses_cannot_all_pass_before_any_is_counted() -> None:
    throttle = SignInThrottle(Clock())
    checks = Checks(False)
    refused = []
    start = threading.Barrier(40)

    def guess() -> None:
        start.wait()
        try:
            throttle.attempt("10.0.0.9", None, checks)
        except Throttled:
            refused.append(1)

    threads = [threading.Thread(target=guess) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert checks.ran == FREE_FAILURES and len(refused) == 40 - FREE_FAILURES


def test_a_device_cookie_is_valid_only_as_issued_and_for_its_access_key() -> None:
    cookies = DeviceCookies("the admin's secret")
    cookie = cookies.issue("admin")
    device = cookies.device(cookie, "admin")
    assert device is not None and cookie.startswith(device + ".")
    assert cookies.device(cookie, "someone-else") is None
    assert cookies.device(cookie[:-1] + ("0" if cookie[-1] != "0" else "1"), "admin") is None
    assert cookies.device(None, "admin") is None and cookies.device("nonce-only", "admin") is None
    assert DeviceCookies("a new secret").device(cookie, "admin") is None  # a changed secret ends every device
