"""The web console's JSON API and its guards against a real cluster (issue 13): read-only until
one signs in, messages only after, bad parameters answered 400 saying what to give, wrong
sign-ins slowed down, HTTPS with the cluster's certificate (in real headless Chromium, Debian's
package, run as a command). Each page drawn in a browser: ``test_console_pages``."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from rocketspark import Admin, Consumer, LocalCluster, Message, Producer

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=2) as cluster, Admin(cluster.nameserver) as admin:
        admin.create_topic("orders", 4)
        with Producer(cluster.nameserver) as producer, Consumer(cluster.nameserver) as consumer:
            producer.send_batch([Message("orders", b"o", queue_id=1)] * 7)
            consumer.commit_offset("billing", "orders", 1, 2)
        yield cluster


def chromium(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: `make test` installs it (apt-get install chromium)")
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",  # root in CI
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=8000",  # the page's fetches and first refreshes run
        *args,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    """What the page logged to its console (errors, uncaught exceptions, failed loads)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def test_the_console_error_check_sees_what_a_broken_page_logs() -> None:
    """The check below is only worth something if this Chromium reports a page's console: a
    page that logs an error and throws must be caught by it."""
    broken = "data:text/html,<script>console.error('probe-logged');throw new Error('probe-thrown')</script>"
    logged = " ".join(console_messages(chromium(broken, "--dump-dom").stderr))
    assert "probe-logged" in logged and "probe-thrown" in logged


def call(
    url: str, method: str = "GET", body: Any = None, cookie: str = "", console: bool = True, host: str = ""
) -> tuple[int, Any, str]:
    headers = {"Content-Type": "application/json", **({"X-Console": "1"} if console else {})}
    if host:
        headers["Host"] = host
    if cookie:
        headers["Cookie"] = cookie
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), response.headers.get("Set-Cookie", "")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), ""


def test_the_console_is_read_only_until_one_signs_in_as_admin(cluster: LocalCluster) -> None:
    api = cluster.console_url + "api/"
    status, topics, _ = call(api + "topics")
    assert (
        status == 200
        and {"name": "orders", "kind": "normal", "queues": 8, "brokers": ["broker-a", "broker-b"]} in topics
    )
    assert call(api + "topics", "POST", {"name": "new-one"})[0] == 401  # reading needs nothing; changing does
    assert call(api + "topics", "POST", {"name": "new-one"}, console=False)[0] == 403  # not from the page
    assert call(api + "topics", host="evil.example:80")[0] == 421  # DNS rebinding: a name it does not listen by
    assert call(api + "session")[1] == {"admin": False, "user": None}  # who the admin is: not before sign-in
    status, answer, _ = call(api + "session", "POST", {"accessKey": cluster.console_access_key, "secret": "wrong"})
    assert status == 401 and "wrong access key or secret" in answer["error"]

    status, _, cookie = call(
        api + "session", "POST", {"accessKey": cluster.console_access_key, "secret": cluster.console_secret}
    )
    assert status == 200 and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    session = cookie.split(";")[0]
    assert call(api + "session", cookie=session)[1]["admin"] is True
    status, created, _ = call(api + "topics", "POST", {"name": "new-one", "queues": 2}, session)
    assert status == 200 and created["created"] == ["broker-a", "broker-b"]
    status, answer, _ = call(api + "topics", "POST", {"name": "bad name!", "queues": 2}, session)
    assert status == 400 and "bad name!" in answer["error"]
    status, answer, _ = call(api + "topics", "POST", {"name": "x", "queues": None}, session)
    assert status == 400 and "queues must be a whole number" in answer["error"]
    status, reset, _ = call(api + "groups/billing/reset", "POST", {"topic": "orders", "to": "earliest"}, session)
    assert status == 200 and len(reset["offsets"]) == 8
    assert call(api + "topics/nosuch")[0] == 404
    assert call(api + "session", "DELETE", cookie=session)[0] == 200
    assert call(api + "topics", "POST", {"name": "other"}, session)[0] == 401  # signed out


def test_the_console_finds_a_message_by_either_id_once_signed_in(cluster: LocalCluster) -> None:
    api = cluster.console_url + "api/"
    with Producer(cluster.nameserver) as producer:
        sent = producer.send(Message("orders", "find me ü".encode(), tags="T", keys="k9", queue_id=6))
    assert (sent.broker_name, sent.queue_id) == ("broker-b", 2)  # the topic's queue 6 is broker-b's queue 2
    assert call(api + f"messages/{sent.msg_id}")[0] == 403  # a body is data: not for every visitor
    _, _, cookie = call(
        api + "session", "POST", {"accessKey": cluster.console_access_key, "secret": cluster.console_secret}
    )
    session = cookie.split(";")[0]
    by_offset = call(api + f"messages/{sent.offset_msg_id}", cookie=session)
    assert by_offset[0] == 200, by_offset
    shown = by_offset[1]
    assert (shown["msgId"], shown["offsetMsgId"]) == (sent.msg_id, sent.offset_msg_id)
    assert (shown["topic"], shown["queueId"], shown["broker"]) == ("orders", 6, "broker-b")  # as Spark numbers it
    assert shown["queueOffset"] == sent.queue_offset
    assert (shown["tag"], shown["keys"], shown["bodyBytes"]) == ("T", ["k9"], 10)
    assert shown["preview"] == {"kind": "text", "text": "find me ü", "bytes": 10, "truncated": False}
    assert shown["trace"]["events"] == []  # the topic is not traced
    deadline = time.monotonic() + 15  # a client id is found once the key index has caught up
    while (by_id := call(api + f"messages/{sent.msg_id}", cookie=session))[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert by_id[1] == shown
    status, answer, _ = call(api + "messages/no-such-id", cookie=session)
    assert status == 404 and "no message has id no-such-id" in answer["error"]


def test_every_page_is_served_and_bad_parameters_say_what_to_give(cluster: LocalCluster) -> None:
    url = cluster.console_url
    for page in ("", "topics", "topics/orders", "messages", "messages/ABC", "groups/billing", "producers", "dlq"):
        with urllib.request.urlopen(url + page, timeout=10) as answer:  # the one page; its script draws the path's
            assert answer.headers["Content-Type"].startswith("text/html") and b'type="module"' in answer.read()
    with urllib.request.urlopen(url + "static/messages.js", timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/javascript")
    for missing in ("nothing", "static/nothing.js", "static/../server.py"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url + missing, timeout=10)
        assert refused.value.code == 404
    api = url + "api/"
    _, _, cookie = call(
        api + "session", "POST", {"accessKey": cluster.console_access_key, "secret": cluster.console_secret}
    )
    session = cookie.split(";")[0]
    assert call(api + "messages?topic=orders")[0] == 403  # bodies: signed-in admins only
    for query, says in (
        ("", "give topic=<name>"),
        ("?topic=orders&limit=0", "limit must be between 1 and 200 messages a page, got 0"),
        ("?topic=orders&start=yesterday", "start 'yesterday' is neither milliseconds"),
        ("?topic=orders&start=2000&end=1000", "the time range is empty: end 1000 is not after start 2000"),
    ):
        status, answer, _ = call(api + "messages" + query, cookie=session)
        assert status == 400 and says in answer["error"], (query, answer)
    status, answer, _ = call(api + "messages/ABC/resend", "POST", {}, session)
    assert status == 400 and 'resend needs "group"' in answer["error"]
    status, page, _ = call(api + "messages?topic=orders&limit=3", cookie=session)
    assert status == 200 and len(page["messages"]) == 3 and page["cursor"]
    assert call(api + "groups/nosuch-group")[0] == 200  # a group nobody heard of: no members, no lag
    assert call(api + "nothing")[0] == 404


def sign_in(
    url: str, access_key: str, secret: str, *, device: str = "", source: str = "127.0.0.1", trust: str | None = None
) -> tuple[int, dict[str, Any], http.client.HTTPResponse, list[str]]:
    """POST /api/session from ``source`` (any 127.0.0.0/8 address: another client to the
    console), as the page does: status, JSON answer, response and the cookies set."""
    parsed = urlparse(url)
    assert parsed.hostname is not None and parsed.port is not None
    connection = (
        http.client.HTTPSConnection(
            parsed.hostname,
            parsed.port,
            timeout=10,
            source_address=(source, 0),
            context=ssl.create_default_context(cafile=trust),
        )
        if parsed.scheme == "https"
        else http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=10, source_address=(source, 0))
    )
    headers = {"Content-Type": "application/json", "X-Console": "1", **({"Cookie": device} if device else {})}
    try:
        connection.request("POST", "/api/session", json.dumps({"accessKey": access_key, "secret": secret}), headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read()), response, response.headers.get_all("Set-Cookie") or []
    finally:
        connection.close()


def test_wrong_sign_ins_are_refused_with_retry_after_and_the_admins_browser_still_gets_in(
    make_cluster: Callable[..., LocalCluster],
) -> None:
    cluster = make_cluster(brokers=1)
    url, key, secret = cluster.console_url, cluster.console_access_key, cluster.console_secret
    status, _, _, cookies = sign_in(url, key, secret)  # the admin's browser, once: it gets a device cookie
    assert status == 200 and len(cookies) == 2 and cookies[0].startswith("rocketspark_console=")
    device_cookie = cookies[1]
    assert device_cookie.startswith("rocketspark_console_device=")
    assert "HttpOnly" in device_cookie and "SameSite=Strict" in device_cookie and "Path=/api/session" in device_cookie
    device = device_cookie.split(";")[0]

    answers = [sign_in(url, key, f"guess-{i}") for i in range(100)]  # was: 100 checked in 0.09 s
    assert [status for status, *_ in answers] == [401] * 5 + [429] * 95  # 95 refused without being checked
    assert "(4 more before each wrong one makes you wait)" in answers[0][1]["error"]
    assert "(the next one must wait)" in answers[4][1]["error"]
    _, refused, response, _ = answers[-1]
    assert "too many wrong sign-ins from this address: try again in" in refused["error"]
    assert int(response.headers["Retry-After"]) >= 1

    status, refused, response, _ = sign_in(url, key, secret)  # the right secret waits too: nothing is checked
    assert status == 429 and "too many wrong sign-ins" in refused["error"]
    assert sign_in(url, key, secret, device=device)[0] == 200  # but the admin's own browser is not held up
    assert sign_in(url, key, "a-wrong-guess", device=device)[0] == 401  # counted against that browser alone

    time.sleep(int(response.headers["Retry-After"]))  # the wait the console named: then it checks again
    assert sign_in(url, key, secret)[0] == 200


def test_guesses_from_many_addresses_are_slowed_down_together(make_cluster: Callable[..., LocalCluster]) -> None:
    cluster = make_cluster(brokers=1)
    url, key = cluster.console_url, cluster.console_access_key
    for host in range(2, 12):  # ten clients, each stopping short of its own limit of 5
        assert [sign_in(url, key, "guess", source=f"127.0.0.{host}")[0] for _ in range(5)] == [401] * 5
    status, refused, response, _ = sign_in(url, key, cluster.console_secret, source="127.0.0.50")  # a fresh client
    assert status == 429 and "too many wrong sign-ins to this console from everywhere" in refused["error"]
    assert int(response.headers["Retry-After"]) >= 1


def spki_hash(cert_file: Path) -> str:
    """What Chromium's --ignore-certificate-errors-spki-list takes: base64 SHA-256 of the key."""
    cert = x509.load_pem_x509_certificates(cert_file.read_bytes())[0]
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def test_with_tls_the_console_serves_https_with_the_clusters_certificate(
    make_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    cluster = make_cluster(brokers=1, auth=True, tls=True)
    url = cluster.console_url
    assert url.startswith("https://127.0.0.1:")
    trusted = ssl.create_default_context(cafile=cluster.tls_ca_file)
    with urllib.request.urlopen(url + "api/session", timeout=10, context=trusted) as answer:
        assert json.loads(answer.read()) == {"admin": False, "user": None}
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(url + "api/session", timeout=10)  # a client not trusting the cluster's CA

    plain = url.replace("https://", "http://")
    with pytest.raises(urllib.error.HTTPError) as refused:  # nothing is served in the clear
        urllib.request.urlopen(plain + "api/topics", timeout=10)
    assert refused.value.code == 400 and "speaks HTTPS only: use https://" in refused.value.read().decode()
    body = json.dumps({"accessKey": cluster.console_access_key, "secret": cluster.console_secret}).encode()
    in_the_clear = urllib.request.Request(plain + "api/session", body, {"X-Console": "1"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(in_the_clear, timeout=10)
    assert refused.value.code == 400 and not refused.value.headers.get_all("Set-Cookie")  # no session
    status, _, _, cookies = sign_in(url, cluster.console_access_key, cluster.console_secret, trust=cluster.tls_ca_file)
    assert status == 200 and len(cookies) == 2 and all("; Secure" in cookie for cookie in cookies)

    assert cluster.security.certificates is not None
    spki = spki_hash(cluster.security.certificates.server_cert_file)  # trust this certificate's key, no other
    page = chromium(url, "--dump-dom", f"--ignore-certificate-errors-spki-list={spki}", f"--user-data-dir={tmp_path}")
    assert page.returncode == 0, page.stderr[-2000:]
    assert (
        'data-loaded="true"' in page.stdout
        and f"<td>broker-a</td><td>{cluster.brokers['broker-a']}</td>" in page.stdout
    )
    assert console_messages(page.stderr) == []
