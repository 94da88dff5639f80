#!/usr/bin/env python3
"""shardscope-cli export-study / export-run against the readers of the field, on real run logs
made by real verbs.

  check_export.py optuna CLI        a sweep with a program trial (complete, pruned, failed and
                                    oom trials with intermediate values) and an ask/tell study
                                    with two objectives (running, waiting, failed, pruned too),
                                    exported to Optuna journals that optuna.load_study reads back
                                    field by field, and that optuna-dashboard's WSGI API lists.
  check_export.py tensorboard CLI FAKETRAINER
                                    a 2-rank run of the fake trainer and a sweep exported to event
                                    files that TensorBoard's EventAccumulator loads with the run
                                    log's values (float32, as TensorBoard keeps scalars) and the
                                    sweep's parameters as HParams sessions.
"""
import datetime
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import wsgiref.util

# The sweep's trial: f(x, lr, layers, opt) reported at 5 eval steps as f + 1/step; sgd with
# x > 3 runs out of memory (an `error` event of kind oom), sgd with x < -3 exits 5 without done.
# A poor trial (f > 10) waits after its second evaluation, so the median pruner, which reads the
# evals as they come (every 200 ms), stops it; a fast trial would end before being judged. The
# random sampler's seed makes trials 0-2 (the pruner's startup) good and trials 4 and 5 poor.
PROGRAM = r"""import json, sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
x, lr, layers, opt = float(args["x"]), float(args["lr"]), int(args["layers"]), args["opt"]
if opt == "sgd" and x > 3:
    print(json.dumps({"ev": "error", "kind": "oom", "message": "out of memory",
                      "hint": "a smaller batch"}), flush=True)
    sys.exit(3)
if opt == "sgd" and x < -3:
    sys.exit(5)
f = (x - 1) ** 2 + lr * 100 + layers * 0.1 + (0.5 if opt == "adam" else 0)
for step in range(1, 6):
    print(json.dumps({"ev": "eval", "step": step, "metrics": {"objective": f + 1.0 / step}}),
          flush=True)
    time.sleep(5.0 if f > 10 and step >= 2 else 0.02)
print(json.dumps({"ev": "done", "status": "complete", "objective": f}), flush=True)
"""

SWEEP = """[experiment]
name = "quad"

[search]
program = ["python3", "obj.py"]
sampler = "random"
seed = 5
n_trials = 16
concurrency = 1
pruner = {type = "median", n_startup_trials = 3, n_warmup_steps = 1}
objectives = {objective = "minimize"}

[search.space.x]
type = "float"
low = -5.0
high = 5.0

[search.space.lr]
type = "float"
low = 1e-5
high = 1e-2
log = true

[search.space.layers]
type = "int"
low = 2
high = 12
step = 2

[search.space.opt]
type = "categorical"
choices = ["adam", "sgd", "lion"]
"""

# The ask/tell study: two objectives, a bool, a log int, a stepped float, numeric choices.
ASK_TELL = """[experiment]
name = "pair"

[search]
sampler = "random"
seed = 1
n_trials = 6
objectives = {"eval.loss" = "minimize", "eval.acc" = "maximize"}

[search.space.warmup]
type = "float"
low = 0.0
high = 0.5
step = 0.1

[search.space.rank]
type = "int"
low = 1
high = 64
log = true

[search.space.bias]
type = "bool"

[search.space.width]
type = "categorical"
choices = [16, 32, 64]
"""

STATE = {"complete": "COMPLETE", "pruned": "PRUNED", "running": "RUNNING", "queued": "WAITING"}


def cli(cli_path, *args, check=True, env=None):
    r = subprocess.run([cli_path, *args], capture_output=True, text=True, timeout=300, env=env)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {r.returncode}: {r.stdout}{r.stderr}")
    return r


def cli_json(cli_path, db, *args):
    return json.loads(cli(cli_path, "--db", db, "--json", *args).stdout)


def load(path, name):
    import optuna
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))
    return storage, optuna.load_study(study_name=name, storage=storage)


def eval_rows(cli_path, db, run, key):
    rows = cli_json(cli_path, db, "export", run, "--format", "json")["metrics"]
    return {r["step"]: r["value"] for r in rows if r["key"] == key}


def iso_seconds(dt):
    return dt.astimezone(datetime.timezone.utc).timestamp() if dt else None


def check_trial(cli_path, db, study_show, t, o, distributions, curve_key):
    """Trial t (optuna) against o (study show --json) and the run (show --json)."""
    import optuna
    run = cli_json(cli_path, db, "show", str(o["run_id"]))
    status = o["status"]
    expected_state = STATE.get(status, "FAIL")
    assert t.state == optuna.trial.TrialState[expected_state], (t.number, t.state, status)
    assert t.user_attrs["shardscope_status"] == status, (t.number, t.user_attrs)
    assert t.user_attrs["shardscope_run"] == run["name"], (t.number, t.user_attrs)
    if status in ("failed", "oom", "infeasible"):
        assert t.user_attrs["shardscope_error"] == run["error"], (t.number, t.user_attrs)
    # Parameters: the same values, typed, each with the space's distribution.
    assert t.params == o["params"], (t.number, t.params, o["params"])
    for name, dist in t.distributions.items():
        assert dist == distributions[name], (t.number, name, dist)
    assert set(t.distributions) == set(o["params"]), (t.number, t.distributions)
    # Intermediate values: the run's eval rows of the first objective, step by step.
    rows = eval_rows(cli_path, db, run["name"], curve_key)
    assert t.intermediate_values == rows, (t.number, t.intermediate_values, rows)
    if expected_state == "COMPLETE":
        assert t.values == o["values"], (t.number, t.values, o["values"])
    elif expected_state == "PRUNED" and len(study_show["objectives"]) == 1 and rows:
        assert t.values == [rows[max(rows)]], (t.number, t.values)  # Optuna's tell does this
    else:
        assert t.values is None, (t.number, t.values)
    # Times: the run log's, to the millisecond it keeps; a trial asked by a script has no start
    # of its own ranks, so it started when it was asked (created).
    if expected_state == "WAITING":
        assert t.datetime_start is None, t.number
    else:
        start = run["started_at"] if run["started_at"] is not None else run["created_at"]
        assert abs(iso_seconds(t.datetime_start) - start) < 1e-3, (t.number, run)
    if expected_state in ("RUNNING", "WAITING"):
        assert t.datetime_complete is None, t.number
    else:
        assert abs(iso_seconds(t.datetime_complete) - run["ended_at"]) < 1e-3, (t.number, run)


def check_study(cli_path, db, journal, name, distributions, curve_key):
    import optuna
    show = cli_json(cli_path, db, "study", "show", name)
    _, study = load(journal, name)
    directions = [optuna.study.StudyDirection[o["direction"].upper()] for o in show["objectives"]]
    assert study.directions == directions, (study.directions, directions)
    assert study.metric_names == [o["metric"] for o in show["objectives"]], study.metric_names
    assert len(study.trials) == len(show["trials"]), (len(study.trials), len(show["trials"]))
    # The first objective's eval metric (`report` stores its values under the objective's name).
    curve_key = curve_key or show["objectives"][0]["metric"]
    for t, o in zip(study.trials, show["trials"]):
        assert t.number == o["number"] == t.user_attrs["shardscope_trial_number"], (t.number, o)
        check_trial(cli_path, db, show, t, o, distributions, curve_key)
    return study, show


def dashboard_get(storage, path):
    import optuna_dashboard
    app = optuna_dashboard.wsgi(storage)
    environ = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()}
    wsgiref.util.setup_testing_defaults(environ)
    status = []
    body = b"".join(app(environ, lambda s, h, *a: status.append(s)))
    assert status and status[0].startswith("200"), (path, status, body[:300])
    return json.loads(body)


def check_dashboard(journal, name, study):
    storage, _ = load(journal, name)
    listed = dashboard_get(storage, "/api/studies")["study_summaries"]
    assert [s["study_name"] for s in listed] == [name], listed
    detail = dashboard_get(storage, f"/api/studies/{listed[0]['study_id']}")
    states = [t["state"] for t in detail["trials"]]
    assert states == [t.state.name.capitalize() for t in study.trials], states
    assert detail["objective_names"] == study.metric_names, detail.get("objective_names")
    for t, shown in zip(study.trials, detail["trials"]):
        steps = {v["step"]: v["value"] for v in shown["intermediate_values"]}
        assert steps == t.intermediate_values, (t.number, steps)


def ask_tell_study(cli_path, db, tmp):
    """Trials 0-1 complete, 2 failed, 3 pruned (with reports), 4 running, 5 enqueued."""
    exp = os.path.join(tmp, "pair.toml")
    with open(exp, "w") as f:
        f.write(ASK_TELL)
    cli(cli_path, "--db", db, "study", "create", "pair", exp, "--max-retries", "0")
    owner = str(os.getpid())  # alive while the export runs: trial 4 stays running
    for n in range(5):
        asked = cli_json(cli_path, db, "study", "ask", "pair", "--owner-pid", owner)
        assert asked["number"] == n, asked
        for step in range(1, 3):
            cli(cli_path, "--db", db, "study", "report", "pair", str(n), str(step),
                repr(0.5 * n + 1.0 / step))
    cli(cli_path, "--db", db, "study", "tell", "pair", "0", "0.25", "0.75")
    cli(cli_path, "--db", db, "study", "tell", "pair", "1", "0.5", "0.875")
    cli(cli_path, "--db", db, "study", "tell", "pair", "2", "--state", "failed", "--reason",
        "diverged")
    cli(cli_path, "--db", db, "study", "tell", "pair", "3", "--state", "pruned")
    cli(cli_path, "--db", db, "study", "enqueue", "pair", "--set", "warmup=0.2", "--set",
        "rank=8", "--set", "bias=true", "--set", "width=32")


def optuna_checks(cli_path):
    import optuna
    from optuna.distributions import (CategoricalDistribution, FloatDistribution,
                                      IntDistribution)
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "runs.db")
        with open(os.path.join(tmp, "obj.py"), "w") as f:
            f.write(PROGRAM)
        with open(os.path.join(tmp, "quad.toml"), "w") as f:
            f.write(SWEEP)
        cli(cli_path, "--db", db, "sweep", os.path.join(tmp, "quad.toml"))

        journal = os.path.join(tmp, "quad.log")
        out = cli_json(cli_path, db, "export-study", "quad", "--to", "optuna", journal)
        sweep_space = {"x": FloatDistribution(-5.0, 5.0),
                       "lr": FloatDistribution(1e-5, 1e-2, log=True),
                       "layers": IntDistribution(2, 12, step=2),
                       "opt": CategoricalDistribution(["adam", "sgd", "lion"])}
        study, show = check_study(cli_path, db, journal, "quad", sweep_space, "eval.objective")
        counts = show["counts"]
        assert out["trials"] == 16 and out["complete"] == counts["complete"], (out, counts)
        statuses = {t.user_attrs["shardscope_status"] for t in study.trials}
        assert {"complete", "pruned", "failed", "oom"} <= statuses, statuses
        assert any(t.intermediate_values for t in study.trials
                   if t.state == optuna.trial.TrialState.PRUNED), "no pruned curve"
        assert study.best_trial.number == show["best"]["number"], study.best_trial.number
        check_dashboard(journal, "quad", study)

        ask_tell_study(cli_path, db, tmp)
        pair_journal = os.path.join(tmp, "pair.log")
        cli(cli_path, "--db", db, "export-study", "pair", "--to", "optuna", pair_journal)
        pair_space = {"warmup": FloatDistribution(0.0, 0.5, step=0.1),
                      "rank": IntDistribution(1, 64, log=True),
                      "bias": CategoricalDistribution([False, True]),
                      "width": CategoricalDistribution([16, 32, 64])}
        pair, _ = check_study(cli_path, db, pair_journal, "pair", pair_space, None)
        states = [t.state.name for t in pair.trials]
        assert states == ["COMPLETE", "COMPLETE", "FAIL", "PRUNED", "RUNNING", "WAITING"], states
        assert [t.number for t in pair.best_trials] == [0, 1], pair.best_trials
        assert pair.trials[2].user_attrs["shardscope_error"] == "diverged", pair.trials[2]
        check_dashboard(pair_journal, "pair", pair)
    print("optuna: journals read back equal by optuna", optuna.__version__)


def tiny_experiment(tmp, trainer):
    with open(os.path.join(tmp, "train.jsonl"), "w") as f:
        for i in range(64):
            f.write(json.dumps({"input_ids": [(i + 3 * t) % 256 for t in range(16)]}) + "\n")
    path = os.path.join(tmp, "tiny.toml")
    with open(path, "w") as f:
        f.write(f"""[experiment]
name = "tiny"
[model]
arch = "tiny"
tiny_hidden_size = 16
tiny_layers = 1
[data]
train_path = "train.jsonl"
seq_len = 16
[train]
max_steps = 12
batch_size = 4
ckpt_at_end = false
[launch]
nproc_per_node = 2
trainer = "{trainer}"
kind = "local"
""")
    return path


def scalars_by_rank(logdir):
    from tensorboard.backend.event_processing import event_accumulator
    out = {}
    for entry in sorted(os.listdir(logdir)):
        if not entry.startswith("rank_"):
            continue
        acc = event_accumulator.EventAccumulator(os.path.join(logdir, entry),
                                                 size_guidance={event_accumulator.SCALARS: 0})
        acc.Reload()
        out[int(entry[5:])] = {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}
    return out


def f32(v):
    import numpy as np
    return float(np.float32(v))


def check_run_scalars(cli_path, db, run, logdir):
    rows = cli_json(cli_path, db, "export", run, "--format", "json")["metrics"]
    expected = {}
    for r in rows:
        tag = r["key"].replace(".", "/")
        expected.setdefault(r["rank"], {}).setdefault(tag, []).append(r)
    got = scalars_by_rank(logdir)
    assert set(got) == set(expected), (sorted(got), sorted(expected))
    for rank, tags in expected.items():
        assert set(got[rank]) == set(tags), (rank, sorted(got[rank]), sorted(tags))
        for tag, points in tags.items():
            events = got[rank][tag]
            assert [e.step for e in events] == [p["step"] for p in points], (rank, tag)
            for e, p in zip(events, points):
                value = p["value"] if p["value"] is not None else math.nan
                assert e.value == f32(value) or (math.isnan(e.value) and math.isnan(value)), \
                    (rank, tag, e, p)
                assert abs(e.wall_time - p["time"]) < 1e-6, (rank, tag, e, p)
    return expected


def hparams_session(logdir):
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import metadata
    acc = event_accumulator.EventAccumulator(logdir)
    acc.Reload()
    start = metadata.parse_session_start_info_plugin_data(
        acc.SummaryMetadata(metadata.SESSION_START_INFO_TAG).plugin_data.content)
    end = metadata.parse_session_end_info_plugin_data(
        acc.SummaryMetadata(metadata.SESSION_END_INFO_TAG).plugin_data.content)
    objectives = {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}
    return start, end, objectives


def hparams_tab(logdir):
    """What TensorBoard's HParams tab asks its backend for: every session group, with hparams,
    metric values and session statuses (the plugin's own ListSessionGroups handler)."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider
    from tensorboard.backend.event_processing import plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import api_pb2, backend_context, list_session_groups
    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, logdir)
    tb = base_plugin.TBContext(logdir=logdir, multiplexer=mux, data_provider=provider)
    request = api_pb2.ListSessionGroupsRequest(
        allowed_statuses=[api_pb2.STATUS_UNKNOWN, api_pb2.STATUS_SUCCESS,
                          api_pb2.STATUS_FAILURE, api_pb2.STATUS_RUNNING],
        aggregation_type=api_pb2.AGGREGATION_AVG, include_metrics=True, slice_size=1000)
    handler = list_session_groups.Handler(context.RequestContext(),
                                          backend_context.Context(tb), "", request)
    return {g.name: g for g in handler.run().session_groups}


def hparam_value(v):
    return v.string_value if v.HasField("string_value") else (
        v.bool_value if v.HasField("bool_value") else v.number_value)


def check_experiment(study_dir):
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import api_pb2, metadata
    acc = event_accumulator.EventAccumulator(study_dir)
    acc.Reload()
    experiment = metadata.parse_experiment_plugin_data(
        acc.SummaryMetadata(metadata.EXPERIMENT_TAG).plugin_data.content)
    infos = {h.name: h for h in experiment.hparam_infos}
    assert set(infos) == {"x", "lr", "layers", "opt"}, sorted(infos)
    for name, (low, high) in {"x": (-5, 5), "lr": (1e-5, 1e-2), "layers": (2, 12)}.items():
        assert infos[name].type == api_pb2.DATA_TYPE_FLOAT64, infos[name]
        assert (infos[name].domain_interval.min_value,
                infos[name].domain_interval.max_value) == (low, high), infos[name]
    assert infos["opt"].type == api_pb2.DATA_TYPE_STRING, infos["opt"]
    assert [v.string_value for v in infos["opt"].domain_discrete.values] == \
        ["adam", "sgd", "lion"], infos["opt"]
    assert [m.name.tag for m in experiment.metric_infos] == ["objective/objective"], experiment


def tensorboard_checks(cli_path, trainer):
    from tensorboard.plugins.hparams import api_pb2
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "runs.db")
        cli(cli_path, "--db", db, "run", tiny_experiment(tmp, trainer), "--set", "train.lr=0.002")
        run = cli_json(cli_path, db, "ls")["runs"][0]["name"]
        logdir = os.path.join(tmp, "tb-run")
        out = cli_json(cli_path, db, "export-run", run, "--to", "tensorboard", logdir)
        expected = check_run_scalars(cli_path, db, run, logdir)
        assert {0, 1} <= set(expected), sorted(expected)
        for tag in ("loss", "lr", "grad_norm", "tokens_per_s", "mem/peak"):
            assert tag in expected[0], (tag, sorted(expected[0]))
        assert "mem/peak" in expected[1], sorted(expected[1])
        rows = sum(len(p) for t in expected.values() for p in t.values())
        assert out["scalars"] == rows + 1, (out, rows)  # and the objective
        start, end, objectives = hparams_session(logdir)
        assert start.hparams["train.lr"].number_value == 0.002, start
        assert end.status == api_pb2.STATUS_SUCCESS, end
        shown = cli_json(cli_path, db, "show", run)
        assert objectives["objective/objective"][0].value == f32(shown["objective"]), objectives

        with open(os.path.join(tmp, "obj.py"), "w") as f:
            f.write(PROGRAM)
        with open(os.path.join(tmp, "quad.toml"), "w") as f:
            f.write(SWEEP.replace("n_trials = 16", "n_trials = 12"))
        cli(cli_path, "--db", db, "sweep", os.path.join(tmp, "quad.toml"))
        study_dir = os.path.join(tmp, "tb-study")
        cli(cli_path, "--db", db, "export-study", "quad", "--to", "tensorboard", study_dir)
        show = cli_json(cli_path, db, "study", "show", "quad")
        statuses = set()
        for o in show["trials"]:
            name = cli_json(cli_path, db, "show", str(o["run_id"]))["name"]
            start, end, objectives = hparams_session(os.path.join(study_dir, name))
            params = {k: (v.string_value if v.HasField("string_value") else v.number_value)
                      for k, v in start.hparams.items()}
            assert params == o["params"], (name, params, o["params"])
            status = {"complete": api_pb2.STATUS_SUCCESS, "failed": api_pb2.STATUS_FAILURE,
                      "oom": api_pb2.STATUS_FAILURE}.get(o["status"], api_pb2.STATUS_UNKNOWN)
            assert end.status == status, (name, end.status, o["status"])
            if o["state"] == "complete":
                assert objectives["objective/objective"][0].value == f32(o["values"][0]), name
            else:
                assert "objective/objective" not in objectives, (name, objectives)
            if os.path.isdir(os.path.join(study_dir, name, "rank_0")):
                check_run_scalars(cli_path, db, name, os.path.join(study_dir, name))
            statuses.add(o["status"])
        assert {"complete", "pruned", "oom"} <= statuses, statuses
        check_experiment(study_dir)
        groups = hparams_tab(study_dir)
        assert len(groups) == len(show["trials"]), (len(groups), len(show["trials"]))
        for o in show["trials"]:
            group = next(g for g in groups.values()
                         if {k: hparam_value(v) for k, v in g.hparams.items()} == o["params"])
            metrics = {m.name.tag: m.value for m in group.metric_values}
            if o["state"] == "complete":
                assert metrics == {"objective/objective": f32(o["values"][0])}, (o, metrics)
    print("tensorboard: event files loaded equal by tensorboard's EventAccumulator")


def main():
    mode, cli_path = sys.argv[1], sys.argv[2]
    if mode == "optuna":
        optuna_checks(cli_path)
    elif mode == "tensorboard":
        tensorboard_checks(cli_path, sys.argv[3])
    else:
        sys.exit(f"check_export.py: unknown mode {mode!r}; use optuna or tensorboard")


if __name__ == "__main__":
    main()
