import fcntl
import itertools
import json
import math
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from autorec.arch import ArchSpec, DotConfig, TableSpec
from autorec.report import (
    arch_figure,
    arch_graph,
    arch_probs_data,
    history_data,
    importance_data,
    layout,
    non_dominated,
    pareto_data,
    report_html,
    study_figures,
    write_report,
)
from autorec.study import StudyConfig, open_storage, run_study, summarize, trial_arch

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
# CI installs Chromium and sets AUTOREC_REQUIRE_CHROMIUM, so there a missing browser fails.
needs_chromium = pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("AUTOREC_REQUIRE_CHROMIUM"),
                                    reason="needs /usr/bin/chromium (apt package chromium)")


# ---- studies -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def study(tmp_path_factory) -> optuna.Study:
    """One real tiny study (5 trials and a baseline on synthetic data), shared by the module."""
    tmp = tmp_path_factory.mktemp("report")
    config = {
        "name": "r", "data": {"name": "synthetic", "options": {"preset": "tiny", "num_samples": 2000}},
        "space": str(ROOT / "search_spaces" / "zoo.yaml"), "strategy": "random", "objectives": ["val_auc"],
        "budget": {"trials": 5, "epochs": 1, "batch_size": 256, "max_steps_per_epoch": 3},
        "pruner": "none", "baselines": ["dlrm"], "seed": 0,
    }
    (tmp / "study.yaml").write_text(yaml.safe_dump(config))
    loaded = StudyConfig.load(tmp / "study.yaml")
    run_study(loaded, log=lambda *_: None)
    return optuna.load_study(study_name="r", storage=open_storage(loaded.storage_url))


def copy_study(source: optuna.Study, objectives: list[str], first_attrs: dict | None = None) -> optuna.Study:
    """An in-memory study with ``source``'s completed trials re-valued for ``objectives`` (the
    first one with ``first_attrs`` added to its user attributes)."""
    directions = ["maximize" if o == "val_auc" else "minimize" for o in objectives]
    target = optuna.create_study(directions=directions)
    target.set_user_attr("objectives", objectives)
    for i, t in enumerate(source.get_trials(states=(TrialState.COMPLETE,))):
        values = [t.user_attrs["metrics"]["val"]["auc"] if o == "val_auc" else t.user_attrs["costs"][o]
                  for o in objectives]
        attrs = {**t.user_attrs, **(first_attrs or {} if i == 0 else {})}
        target.add_trial(optuna.trial.create_trial(values=values, params=t.params,
                                                   distributions=t.distributions, user_attrs=attrs))
    return target


@pytest.fixture(scope="module")
def multi_study(study) -> optuna.Study:
    return copy_study(study, ["val_auc", "flops"])


def known_study(points: list[tuple[float, float]], arch: dict) -> optuna.Study:
    """A single-objective study whose trial i has validation AUC and FLOPs ``points[i]``."""
    known = optuna.create_study(direction="maximize")
    x = optuna.distributions.FloatDistribution(0, 1)
    for i, (auc, flops) in enumerate(points):
        attrs = {"arch": arch, "metrics": {"val": {"auc": auc}, "test": {"auc": auc - 0.01}},
                 "costs": {"flops": flops}}
        known.add_trial(optuna.trial.create_trial(value=auc, params={"x": i / len(points)},
                                                  distributions={"x": x}, user_attrs=attrs))
    return known


def brute_force_front(trials: list[optuna.trial.FrozenTrial]) -> set[int]:
    def point(t):
        return t.user_attrs["metrics"]["val"]["auc"], t.user_attrs["costs"]["flops"]

    front = set()
    for t in trials:
        a = point(t)
        if not any(b[0] >= a[0] and b[1] <= a[1] and b != a for b in map(point, trials)):
            front.add(t.number)
    return front


def complete(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return study.get_trials(states=(TrialState.COMPLETE,))


# ---- figure data -------------------------------------------------------------------------
def test_history_data_counts_values_and_running_best(study):
    data = history_data(study)
    trials = complete(study)
    assert data.numbers == [t.number for t in trials] and len(data.numbers) == 5
    assert data.val_auc == [t.user_attrs["metrics"]["val"]["auc"] for t in trials]
    assert data.best_so_far == [max(data.val_auc[: i + 1]) for i in range(len(data.val_auc))]
    assert data.best_so_far[-1] == summarize(study).best["val_auc"]
    assert data.pruned == {} and data.failed == []


def test_pareto_front_is_the_brute_force_non_dominated_set(study, multi_study):
    for s in (study, multi_study):
        data = pareto_data(s)
        assert data.cost == "flops" and len(data.numbers) == 5
        assert set(data.front) == brute_force_front(complete(s))
        assert [data.costs[data.numbers.index(n)] for n in data.front] == sorted(
            data.costs[data.numbers.index(n)] for n in data.front)
    assert set(pareto_data(multi_study).front) == {t.number for t in multi_study.best_trials}
    assert set(pareto_data(study).baselines) == {"dlrm"}
    flops, auc = pareto_data(study).baselines["dlrm"]
    assert flops > 0 and auc == study.user_attrs["baselines"]["dlrm"]["val"]["auc"]


def test_pareto_front_of_known_points(study):
    arch = complete(study)[0].user_attrs["arch"]
    #          0: front  1: front    2: dominated by 1  3: front (cheapest) 4: same point as 1
    points = [(0.70, 100.0), (0.72, 200.0), (0.71, 300.0), (0.69, 50.0), (0.72, 200.0)]
    data = pareto_data(known_study(points, arch))
    assert data.front == [3, 0, 1, 4] and data.on_front == [True, True, False, True, True]
    assert non_dominated([(0.5, 1.0), (0.6, 1.0), (0.4, 0.5)]) == [1, 2]
    known = known_study(points, arch)
    known.add_trial(optuna.trial.create_trial(state=TrialState.PRUNED, intermediate_values={0: 0.6, 1: 0.65}))
    known.add_trial(optuna.trial.create_trial(state=TrialState.FAIL))
    history = history_data(known)
    assert history.best_so_far == [0.70, 0.72, 0.72, 0.72, 0.72]
    assert history.pruned == {5: 0.65} and history.failed == [6]
    assert pareto_data(known).front == [3, 0, 1, 4]


def test_importance_needs_two_completed_trials(study):
    importances = importance_data(study)
    assert importances and set(importances) <= {p for t in complete(study) for p in t.params}
    assert math.isclose(sum(importances.values()), 1.0, rel_tol=1e-6)
    assert list(importances.values()) == sorted(importances.values(), reverse=True)
    arch = complete(study)[0].user_attrs["arch"]
    assert importance_data(known_study([(0.7, 1.0)], arch)) == {}
    assert importance_data(optuna.create_study()) == {}


# ---- architecture graph ------------------------------------------------------------------
def check_graph(spec: ArchSpec) -> None:
    graph = arch_graph(spec)
    n_layers = len(spec.layers)
    assert graph.number_of_nodes() == len(spec.tables) + (1 if spec.n_dense else 0) + n_layers + 2
    chain = [f"layer:{i}" for i in range(n_layers)] + ["over", "output"]
    inputs = [f"table:{t.name}" for t in spec.tables] + (["dense"] if spec.n_dense else [])
    expected = [(i, chain[0]) for i in inputs] + list(itertools.pairwise(chain))
    assert list(graph.edges) == expected
    widths = spec.layer_widths()
    for i, config in enumerate(spec.layers):
        node = graph.nodes[f"layer:{i}"]
        assert (node["kind"], node["f_in"], node["f_out"], node["layer"]) == (config.kind, widths[i],
                                                                             widths[i + 1], i + 1)
        assert config.kind in node["label"] and f"{widths[i]}→{widths[i + 1]}" in node["label"]
    assert all(graph.nodes[n]["layer"] == 0 for n in inputs)
    positions = layout(graph)
    assert [positions[n][0] for n in chain] == sorted({positions[n][0] for n in chain})
    assert len({positions[n] for n in graph}) == graph.number_of_nodes()  # nothing drawn on top of another
    figure = arch_figure(spec)
    assert len(figure.layout.annotations) == graph.number_of_edges()
    assert len(figure.data[0].x) == graph.number_of_nodes()


def test_arch_graph_of_every_trial_and_edge_cases(study):
    for t in complete(study):
        check_graph(trial_arch(t))
    table = TableSpec(name="t", features=("a", "b"), num_embeddings=10, dim=4)
    check_graph(ArchSpec(dim=4, tables=(table,), over_arch=(8,)))  # no dense features, no layers
    check_graph(ArchSpec(dim=4, n_dense=2, dense_arch=(8,), tables=(table,), layers=(DotConfig(),) * 2))


# ---- DNAS architecture probabilities -----------------------------------------------------
def with_arch_probs(study: optuna.Study) -> tuple[optuna.Study, int]:
    probs = [[{"wukong": 0.5, "dlrm": 0.5}, {"wukong": 0.8, "dlrm": 0.2}],
             [{"dhen": 0.3, "mlp": 0.7}, {"dhen": 0.1, "mlp": 0.9}]]
    copy = copy_study(study, ["val_auc"], first_attrs={"arch_probs": probs})
    return copy, copy.get_trials()[0].number


def test_arch_probs_heat_map_from_a_hand_set_attribute(study):
    copy, number = with_arch_probs(study)
    data = arch_probs_data(copy.get_trials()[number])
    assert data.kinds == ["dhen", "dlrm", "mlp", "wukong"] and data.steps == [0, 1]
    assert data.probs[0][data.kinds.index("wukong")] == [0.5, 0.8]
    assert data.probs[1][data.kinds.index("wukong")] == [0.0, 0.0]
    figures = study_figures(copy)
    heat = figures[f"arch_probs_trial{number}"]
    assert [trace.type for trace in heat.data] == ["heatmap", "heatmap"]
    assert [list(row) for row in heat.data[1].z] == data.probs[1]
    assert arch_probs_data(copy.get_trials()[1]) is None
    assert f'id="figure-arch_probs_trial{number}"' in report_html(copy)


# ---- HTML report -------------------------------------------------------------------------
class Fetches(HTMLParser):
    """Every URL a page's tags would load (script/img/iframe src, link href, object data)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for name in ("src", "href", "data"):
            if values.get(name) and tag in ("script", "img", "iframe", "link", "object", "embed", "source"):
                self.urls.append(values[name])


@pytest.fixture(scope="module")
def report(study, tmp_path_factory) -> Path:
    return write_report(study, tmp_path_factory.mktemp("html") / "sub" / "report.html", top_k=3)


def test_report_is_self_contained_and_names_the_trials(study, report):
    text = report.read_text()
    fetches = Fetches()
    fetches.feed(text)
    assert fetches.urls == []
    assert text.count("* plotly.js v") == 1  # the library inlined exactly once
    assert "Content-Security-Policy" in text
    summary = summarize(study)
    assert summary.verdict() in text and "dlrm" in text
    best = sorted(complete(study), key=lambda t: -t.user_attrs["metrics"]["val"]["auc"])
    for t in best:
        assert f"trial {t.number}" in text
    for t in best[:3]:
        assert f'id="arch-{t.number}"' in text
    assert f'id="arch-{best[3].number}"' not in text
    for key in ("history", "pareto", "importance"):
        assert f'id="figure-{key}"' in text


def test_report_of_a_study_without_completed_trials(tmp_path):
    empty = optuna.create_study()
    text = write_report(empty, tmp_path / "empty.html").read_text()
    assert "no trial completed" in text and set(study_figures(empty)) == {"history", "pareto", "importance"}


# ---- the page in a real browser ----------------------------------------------------------
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
    JSON messages ending in NUL, the browser reads fd 3 and writes fd 4), so a test sees every
    console message, uncaught exception, log entry and request of a page."""

    def __init__(self, executable: Path = CHROMIUM, timeout: float = 30.0) -> None:
        self.profile = tempfile.mkdtemp(prefix="chromium-")
        child_in, self.to_browser = os.pipe()
        self.from_browser, child_out = os.pipe()
        # Above 4, so the child's dup2 onto 3 and 4 cannot clobber one with the other.
        high_in = fcntl.fcntl(child_in, fcntl.F_DUPFD_CLOEXEC, 10)
        high_out = fcntl.fcntl(child_out, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(child_in)
        os.close(child_out)

        def onto_3_and_4() -> None:
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        self.process = subprocess.Popen(
            [str(executable), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=onto_3_and_4, pass_fds=(3, 4), start_new_session=True)
        os.close(high_in)
        os.close(high_out)
        self.timeout, self.buffer, self.next_id, self.events = timeout, b"", 0, []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self.receive(deadline)
            if reply is None:
                raise TimeoutError(f"chromium did not answer {method} in {self.timeout} s")
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def receive(self, deadline: float) -> dict | None:
        """The next message, or None at the deadline."""
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                return None
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise EOFError(f"chromium exited with code {self.process.poll()}")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def load(self, path: Path, settle: float = 1.0) -> dict:
        """Open ``path`` in a new tab, wait for its load event and ``settle`` quiet seconds, and
        return its ``errors`` (console errors, exceptions, error log entries), the ``requests``
        it made and the number of rendered plotly ``plots``."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.send(f"{domain}.enable", session=session)
        start = len(self.events)
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        deadline, loaded = time.monotonic() + self.timeout, False
        while time.monotonic() < deadline:
            quiet = time.monotonic() + settle if loaded else deadline
            message = self.receive(min(deadline, quiet))
            if message is None:
                break
            self.events.append(message)
            loaded |= message.get("method") == "Page.loadEventFired" and message.get("sessionId") == session
        assert loaded, f"{path} did not finish loading in {self.timeout} s"
        drawn = ("[...document.querySelectorAll('.js-plotly-plot')]"
                 ".filter(p => p.querySelector('.main-svg')).length")
        plots = self.send("Runtime.evaluate", {"expression": drawn, "returnByValue": True}, session=session)
        self.send("Target.closeTarget", {"targetId": target})
        events = [e for e in self.events[start:] if e.get("sessionId") == session]
        return {"errors": page_errors(events),
                "requests": [e["params"]["request"]["url"] for e in events
                             if e.get("method") == "Network.requestWillBeSent"],
                "plots": plots["result"]["value"]}

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (OSError, EOFError, TimeoutError, RuntimeError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)  # its own session: the browser and its helpers
            self.process.wait(timeout=10)
        os.close(self.to_browser)
        os.close(self.from_browser)
        shutil.rmtree(self.profile, ignore_errors=True)


def page_errors(events: list[dict]) -> list[str]:
    """The console errors, uncaught exceptions and error log entries among DevTools events."""
    errors = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            errors.append("console.error: " + " ".join(str(a.get("value", a.get("description")))
                                                       for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append(f"{details['text']} {details.get('exception', {}).get('description', '')}".strip())
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f"log: {params['entry']['text']} {params['entry'].get('url', '')}".strip())
    return errors


@pytest.fixture(scope="module")
def chromium():
    browser = Chromium()
    yield browser
    browser.close()


@needs_chromium
def test_report_loads_in_chromium_without_console_errors(chromium, report):
    page = chromium.load(report)
    assert page["errors"] == []
    assert all(url.startswith("file://") for url in page["requests"]), page["requests"]
    figures = report.read_text().count("Plotly.newPlot(")
    assert figures >= 6 and page["plots"] == figures  # every figure drew


NEGATIVE_CONTROLS = {
    "console_error": ('<script>console.error("x")</script>', "console.error: x"),
    "exception": ("<script>undefinedFunction()</script>", "undefinedFunction is not defined"),
    "late_exception": ('<script>setTimeout(() => { throw new Error("late boom") }, 100)</script>',
                       "late boom"),
    "rejection": ('<script>Promise.reject(new Error("nobody caught me"))</script>', "nobody caught me"),
    "remote_script": ('<script src="https://cdn.example.invalid/x.js"></script>', "cdn.example.invalid"),
}


@needs_chromium
@pytest.mark.parametrize("name", list(NEGATIVE_CONTROLS))
def test_console_error_capture_detects_a_broken_page(chromium, tmp_path, name):
    body, expected = NEGATIVE_CONTROLS[name]
    page_path = tmp_path / f"{name}.html"
    page_path.write_text(f"<!DOCTYPE html><html><head></head><body>{body}</body></html>")
    page = chromium.load(page_path)
    assert any(expected in error for error in page["errors"]), page["errors"]


@needs_chromium
def test_a_broken_report_fails_the_browser_check(chromium, report, tmp_path):
    """The same report with a console error, an exception and a remote fetch injected: all three
    are caught (the page's Content-Security-Policy turns the fetch into a console error)."""
    broken = tmp_path / "broken.html"
    injected = ('<img src="https://example.com/x.png"><script>console.error("injected");'
                "Plotly.notAFunction();</script>")
    broken.write_text(report.read_text().replace("<body>", "<body>" + injected, 1))
    errors = chromium.load(broken)["errors"]
    assert any("console.error: injected" in e for e in errors), errors
    assert any("Plotly.notAFunction is not a function" in e for e in errors), errors
    assert any("Content Security Policy" in e and "https://example.com/x.png" in e for e in errors), errors
