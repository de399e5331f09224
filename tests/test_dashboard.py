"""The dashboard in a real browser: headless Chromium (the OS package)
driven by Selenium opens `/dashboard/` of a live run and of an endpoint,
takes the key once, and shows what the test did: the ranks of a 4-rank
domain with their states, the messages between each pair, what the
waiting rank waits for, the failed rank named with its error; an
endpoint's programs, jobs and their output. Also: the page's files and its
Content-Security-Policy, who may read its data, and that the key never
reaches a URL.

With MPIWS_SCREENSHOTS=DIR the screenshots are saved there (the guide's
are made so: MPIWS_SCREENSHOTS=docs/images); else in the test's tmp_path.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import mpiws_serve
from netns import install_packages

MPIWS = Path(sys.executable).parent / "mpiws"
KEY = "d" * 40 + "admin"
KEY_JOBS = "d" * 40 + "jobs"

# Rank 0 sends rank 1 three messages, then waits for rank 3 (tag 9), then
# for the end; rank 2 fails at once; ranks 1 and 3 wait for the go-ahead.
PROGRAM = """
import os, time
from mpiws import MPI
comm = MPI.COMM_WORLD
go = os.environ["GO_FILE"]
def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.05)
def wait_for_go():
    wait_for(go)
if comm.rank == 0:
    for i in range(3):
        comm.send(b"x" * 100, dest=1, tag=1)
    comm.recv(source=3, tag=9)
    wait_for(go + ".end")
elif comm.rank == 1:
    for i in range(3):
        comm.recv(source=0, tag=1)
    wait_for_go()
elif comm.rank == 2:
    1 / 0
else:
    wait_for_go()
    comm.send("go", dest=0, tag=9)
"""


def get(url, key=None):
    req = urllib.request.Request(url, headers={"authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def until(what, within=30.0, every=0.1):
    """Poll ``what`` until it gives something true (returned), for ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        got = what()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within} s: {what.__doc__ or what}")
        time.sleep(every)


@pytest.fixture(scope="module")
def browser():
    install_packages(chromium="chromium", chromedriver="chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    yield driver
    driver.quit()


@pytest.fixture
def shots(tmp_path):
    d = Path(os.environ.get("MPIWS_SCREENSHOTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def css(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def connect(driver, url, key):
    """Open the page, paste the key once, wait until it is live."""
    driver.get_log("browser")  # what earlier pages logged (a run's page whose run ended) is theirs
    driver.get(url)
    driver.execute_script("sessionStorage.clear()")
    driver.get(url)
    until(lambda: css(driver, "#key-input") and css(driver, "#key-input")[0].is_displayed())
    css(driver, "#key-input")[0].send_keys(key)
    css(driver, "#key-connect")[0].click()
    until(lambda: css(driver, "#status[data-state=live]"))
    assert driver.current_url == url, "the key is never in the URL"


def tab(driver, name):
    """Show tab ``name`` (a run's appears with its first document)."""
    button = until(lambda: [b for b in css(driver, f"#tabs .tab[data-tab={name}]") if b.is_displayed()])[0]
    button.click()


def no_page_errors(driver):
    """Nothing the Content-Security-Policy refused, no script error."""
    bad = [e for e in driver.get_log("browser") if e["level"] == "SEVERE" or "Content Security Policy" in e["message"]]
    assert not bad, bad


def test_the_page_is_served_with_a_strict_policy_and_its_data_only_to_admin(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY} admin\n{KEY_JOBS} jobs\n")
    keys.chmod(0o600)
    p, url = mpiws_serve(["--keys", str(keys)])
    try:
        status, headers, body = get(f"{url}/dashboard/")
        assert status == 200 and b"app.js" in body, "the page needs no key: it holds no data"
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "connect-src 'self'" in csp
        assert headers["x-content-type-options"] == "nosniff"
        assert get(f"{url}/dashboard/app.js")[1]["content-type"].startswith("text/javascript")
        for asset in (b"http://", b"https://"):
            assert asset not in get(f"{url}/dashboard/app.js")[2].replace(b"http://www.w3.org", b""), (
                "no asset from elsewhere"
            )
        assert get(f"{url}/dashboard/api/state")[0] == 401
        assert get(f"{url}/dashboard/api/state", KEY_JOBS)[0] == 403, "a jobs key sees no other key's work"
        status, _, body = get(f"{url}/dashboard/api/state", KEY)
        assert status == 200 and json.loads(body)["endpoint"]["url"] == url
        # The browser's own page may call its endpoint (its own origin); another page may not.
        req = urllib.request.Request(
            f"{url}/dashboard/api/state", headers={"authorization": f"Bearer {KEY}", "origin": url}
        )
        assert urllib.request.urlopen(req, timeout=10).status == 200
        req.headers["Origin"] = "http://attacker.example"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=10)
        assert refused.value.code == 403
    finally:
        p.kill()
        p.wait()


def test_open_streams_are_bounded(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY} admin\n")
    keys.chmod(0o600)
    p, url = mpiws_serve(["--keys", str(keys), "--max-dashboard-streams", "1"])
    try:
        req = urllib.request.Request(f"{url}/dashboard/api/events", headers={"authorization": f"Bearer {KEY}"})
        first = urllib.request.urlopen(req, timeout=10)
        assert first.headers["content-type"] == "text/event-stream"
        assert first.readline() == b"event: state\n" and json.loads(first.readline()[len(b"data: ") :])["endpoint"]
        status, _, body = get(f"{url}/dashboard/api/events", KEY)
        assert status == 429 and b"--max-dashboard-streams" in body
        first.close()
        until(lambda: get(f"{url}/dashboard/api/state", KEY)[0] == 200 and _streams(url) == 0)
    finally:
        p.kill()
        p.wait()


def _streams(url):
    limits = json.loads(get(f"{url}/dashboard/api/state", KEY)[2])["endpoint"]["limits"]
    return next(x["used"] for x in limits if x["name"] == "max_dashboard_streams")


def run_with_dashboard(tmp_path, program, *options):
    """``mpiws run OPTIONS --dashboard`` of ``program`` (its text), with a key file of its own and
    ``GO_FILE`` set to ``tmp_path/go``: the process and the page's URL (its first line says it), and the key."""
    key_file = tmp_path / "config" / "key"
    (tmp_path / "prog.py").write_text(program)
    env = dict(os.environ, MPIWS_KEY_FILE=str(key_file), GO_FILE=str(tmp_path / "go"))
    command = [str(MPIWS), "run", *options, "--dashboard", str(tmp_path / "prog.py")]
    run = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    line = run.stderr.readline()
    if not line.startswith("mpiws run: dashboard at http://127.0.0.1:"):
        run.kill()
        raise AssertionError(f"no dashboard announced: {line!r}")
    return run, line.split(" at ")[1].split()[0], key_file.read_text().strip()


def test_a_runs_domain_live_in_the_browser(browser, tmp_path, shots):
    go = tmp_path / "go"
    run, url, key = run_with_dashboard(tmp_path, PROGRAM, "-n", "4", "-k")
    try:
        connect(browser, url, key)
        tab(browser, "domains")
        # The failed rank is named with its error, as it happens.
        failure = until(lambda: css(browser, ".domain .failure[data-rank='2']"))[0]
        assert "ZeroDivisionError" in failure.text, failure.text
        rows = until(lambda: len(css(browser, ".domain .rank-row")) == 4 and css(browser, ".domain .rank-row"))
        assert [r.get_attribute("data-rank") for r in rows] == ["0", "1", "2", "3"]
        # Rank 0 sent rank 1 exactly three messages, and now waits for rank 3's tag 9.
        until(
            lambda: (
                css(browser, ".domain .rank-row[data-rank='0'] .waits")
                and "3" in css(browser, ".domain .rank-row[data-rank='0'] .waits")[0].text
            )
        )
        waits = css(browser, ".domain .rank-row[data-rank='0'] .waits")[0].text
        assert "3" in waits and "9" in waits, waits
        cell = css(browser, ".domain td.cell[data-from='0'][data-to='1']")[0]
        assert cell.get_attribute("data-messages") == "3"
        assert css(browser, ".domain .rank-row[data-rank='0'] td.sent")[0].get_attribute("data-sent-messages") == "3"
        assert (
            css(browser, ".domain .rank-row[data-rank='1'] td.received")[0].get_attribute("data-received-messages")
            == "3"
        )
        assert css(browser, ".domain .rank-row[data-rank='2']")[0].get_attribute("data-state") == "failed"
        browser.save_screenshot(str(shots / "dashboard-domain.png"))
        no_page_errors(browser)
        # Live: once rank 3 sent, it is done and rank 0 waits for nothing.
        go.touch()
        until(lambda: css(browser, ".domain .rank-row[data-rank='3'][data-state='done']"))
        until(lambda: css(browser, ".domain .rank-row[data-rank='0'] .waits")[0].text.strip() in ("", "—", "-"))
    finally:
        go.touch()
        (tmp_path / "go.end").touch()
        run.wait(timeout=60)
    assert run.returncode != 0, "rank 2 failed"


def test_an_endpoints_programs_and_jobs_in_the_browser(browser, tmp_path, shots):
    keys = tmp_path / "keys"
    keys.write_text(f"{KEY} admin\n{KEY_JOBS} jobs\n")
    keys.chmod(0o600)
    p, url = mpiws_serve(["--keys", str(keys), "--program", "echo=echo [in:val:text:string]"])
    try:
        body = json.dumps({"inputs": {"text": "hello from the dashboard test"}}).encode()
        req = urllib.request.Request(
            f"{url}/programs/echo/call",
            data=body,
            headers={"authorization": f"Bearer {KEY_JOBS}", "content-type": "application/json"},
        )
        assert urllib.request.urlopen(req, timeout=60).status == 200
        connect(browser, f"{url}/dashboard/", KEY)
        tab(browser, "endpoint")
        assert css(browser, "#endpoint-programs li[data-program='echo']")
        job = until(lambda: css(browser, "#endpoint-jobs tbody tr.job[data-state='done']"))[0]
        assert "echo" in job.text
        stdout = browser.execute_script("return document.querySelector('#endpoint-jobs pre.stdout').textContent")
        assert "hello from the dashboard test" in stdout
        limit = css(browser, "#endpoint-limits .limit[data-limit='max_jobs']")[0]
        assert (limit.get_attribute("data-used"), limit.get_attribute("data-bound")) == ("1", "1000")
        browser.save_screenshot(str(shots / "dashboard-endpoint.png"))
        no_page_errors(browser)
    finally:
        p.kill()
        p.wait()


def _follow(command, pattern, tmp_path, env=None):
    """Start ``command`` (in ``tmp_path``); the process, its stderr lines, and the page URL it announced."""
    from test_dashboard_runs import Lines

    p = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    err = Lines(p.stderr)
    Lines(p.stdout)
    return p, err, err.wait_for(pattern, seconds=60)


def test_a_workflows_graph_and_step_states_in_the_browser(browser, tmp_path, shots):
    from test_dashboard_runs import GATED, flow

    from mpiws.keys import client_key

    gate = tmp_path / "open"
    command = [str(MPIWS), "workflow", "run", str(flow(tmp_path, GATED)), "xs=[2,3]", f"gate={gate}", "--dashboard"]
    p, err, url = _follow(command, r"^mpiws workflow: dashboard at (\S+) \(paste your key", tmp_path)
    try:
        connect(browser, url, client_key())
        tab(browser, "workflows")
        # Held at its gate: square (two units) done, hold running; drawn as a graph and listed.
        until(lambda: css(browser, ".workflow .step[data-step='square'][data-state='done']"))
        until(lambda: css(browser, ".workflow .step[data-step='hold'][data-state='running']"))
        nodes = css(browser, ".workflow svg .step")
        assert sorted(n.get_attribute("data-step") for n in nodes) == ["hold", "shift", "square"]
        assert len(css(browser, ".workflow svg path, .workflow svg line")) >= 2, "square -> hold -> shift"
        assert css(browser, ".workflow [data-field='manager_bytes']")[0].text not in ("", "0 B"), (
            "the inputs went through it"
        )
        browser.save_screenshot(str(shots / "dashboard-workflow.png"))
        no_page_errors(browser)
        gate.touch()
        until(lambda: css(browser, ".workflow[data-state='done']") or p.poll() is not None)
    finally:
        gate.touch()
        p.wait(timeout=60)
    assert p.returncode == 0, "".join(err.lines)


def test_a_farms_figures_in_the_browser(browser, tmp_path, shots):
    from test_dashboard_runs import FARM

    from mpiws.keys import client_key

    (tmp_path / "farm_main.py").write_text(FARM)
    gate = tmp_path / "open"
    command = [sys.executable, "farm_main.py", str(tmp_path / "died"), str(gate)]
    env = dict(os.environ, MPIWS_FAILURE_TIMEOUT="1")
    p, err, url = _follow(command, r"^mpiws\.futures: dashboard at (\S+) \(paste your key", tmp_path, env)
    try:
        connect(browser, url, client_key())
        tab(browser, "farms")
        field = lambda name: css(browser, f".farm[data-name='pool'] [data-field='{name}']")  # noqa: E731
        until(lambda: field("tasks_done") and field("tasks_done")[0].text.strip() == "60")
        # One worker of three died in its task, which another did again.
        assert [field(n)[0].text.strip() for n in ("workers", "workers_lost", "tasks_resubmitted")] == ["2", "1", "1"]
        browser.save_screenshot(str(shots / "dashboard-farm.png"))
        no_page_errors(browser)
    finally:
        gate.touch()
        p.wait(timeout=60)
    assert p.returncode == 0, "".join(err.lines)


# A ring of 64 ranks: each sends its right neighbour one message of (rank + 1) * 10 bytes, then waits
# for a second one (tag 2) that comes once the test's go-ahead file exists.
RING = """
import os, time
from mpiws import MPI
comm = MPI.COMM_WORLD
r, n = comm.rank, comm.size
comm.send(b"x" * ((r + 1) * 10), dest=(r + 1) % n, tag=1)
comm.recv(source=(r - 1) % n, tag=1)
if r == 0:
    while not os.path.exists(os.environ["GO_FILE"]):
        time.sleep(0.05)
    comm.send(None, dest=1, tag=2)
    comm.recv(source=n - 1, tag=2)
else:
    comm.recv(source=r - 1, tag=2)
    comm.send(None, dest=(r + 1) % n, tag=2)
"""


def test_the_traffic_of_64_ranks_reads_as_a_matrix(browser, tmp_path, shots):
    go = tmp_path / "go"
    run, url, key = run_with_dashboard(tmp_path, RING, "-n", "64")
    try:
        connect(browser, url, key)
        tab(browser, "domains")
        # Every rank sent its one message: 64 cells of the 64 x 64 say 1, the rest 0.
        sent = lambda: css(browser, ".domain td.cell[data-messages='1']")  # noqa: E731
        until(lambda: len(sent()) == 64, within=120)
        assert len(css(browser, ".domain td.cell")) == 64 * 64
        cell = css(browser, ".domain td.cell[data-from='9'][data-to='10']")[0]
        assert (cell.get_attribute("data-messages"), cell.get_attribute("data-bytes")) != ("0", "0")
        assert {(c.get_attribute("data-from"), c.get_attribute("data-to")) for c in sent()} == {
            (str(r), str((r + 1) % 64)) for r in range(64)
        }
        # Each waits for its left neighbour's tag 2 (rank 0 for the go-ahead: for nothing).
        until(lambda: "10" in css(browser, ".domain .rank-row[data-rank='11'] .waits")[0].text)
        assert "2" in css(browser, ".domain .rank-row[data-rank='11'] .waits")[0].text
        browser.execute_script("arguments[0].scrollIntoView()", css(browser, ".domain .matrix")[0])
        browser.save_screenshot(str(shots / "dashboard-domain-64.png"))
        no_page_errors(browser)
    finally:
        go.touch()
        run.wait(timeout=120)
    assert run.returncode == 0
