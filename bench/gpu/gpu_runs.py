"""Starting shardtrain runs for gpu_check.py: configs, ranks with the torchrun environment, their
events, and time limits. Standard library only."""
import concurrent.futures
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import time

RDZV_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "SHARDSCOPE_RDZV_FILE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")


def rel(a, b):
    """|a - b| / |b| (a difference when b is 0)."""
    return abs(a - b) / abs(b) if b else abs(a - b)


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML spelling for {v!r}")


def toml_text(cfg):
    """{"section": {"key": value}} as TOML."""
    lines = []
    for section, values in cfg.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def write_tokens(path, count, seq_len, vocab):
    """Arithmetic progressions modulo vocab (start and stride vary): a pattern the tiny model
    learns, so the loss moves. Deterministic."""
    strides = [1, 2, 3, 5, 7]
    with open(path, "w") as f:
        for i in range(count):
            start = (i * 37 + 11) % vocab
            stride = strides[i % len(strides)]
            f.write(json.dumps({"input_ids": [(start + stride * k) % vocab
                                              for k in range(seq_len)]}) + "\n")
    return path


def read_events(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def tail(path, lines=12):
    if not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:]).strip()


class Run:
    """One finished run: exit codes and every rank's events."""

    def __init__(self, name, run_dir, world, codes, seconds, timed_out):
        self.name, self.dir, self.world = name, run_dir, world
        self.codes, self.seconds, self.timed_out = codes, seconds, timed_out
        self.events = [read_events(os.path.join(run_dir, f"events-rank-{r}.jsonl"))
                       for r in range(world)]
        self.backend = None

    def all(self, kind, rank=0):
        return [e for e in self.events[rank] if e.get("ev") == kind]

    def first(self, kind, rank=0):
        found = self.all(kind, rank)
        return found[0] if found else None

    def curve(self, rank=0):
        """[(step, loss)] with a null loss (non-finite) as NaN."""
        return [(e["step"], math.nan if e.get("loss") is None else e["loss"])
                for e in self.all("step", rank)]

    def peak(self, field):
        """The largest `field` of rank 0's mem events, or None."""
        vals = [e[field] for e in self.all("mem") if isinstance(e.get(field), (int, float))]
        return max(vals) if vals else None

    def ok(self):
        return (not self.timed_out and all(c == 0 for c in self.codes)
                and all(any(e.get("ev") == "done" for e in ev) for ev in self.events))

    def failure(self):
        """Why the run is not ok, in a line or a few: its error event, else its logs' tails."""
        if self.timed_out:
            why = f"killed after {self.seconds:.0f} s (time limit)"
        else:
            why = f"exit codes {self.codes}"
        for rank in range(self.world):
            err = next((e for e in self.events[rank] if e.get("ev") == "error"), None)
            if err:
                return (f"{why}; rank {rank} error {err.get('kind')}: {err.get('message')} "
                        f"(hint: {err.get('hint')})")
        return f"{why}; {self.tail()}"

    def tail(self):
        return " | ".join(tail(os.path.join(self.dir, f"rank-{r}.log"), 6).replace("\n", " | ")
                          for r in range(self.world))


class Runner:
    """Starts shardtrain runs under OUT/work, each in its own folder."""

    def __init__(self, shardtrain, work, log, cuda, cpu_threads):
        self.shardtrain = os.path.abspath(shardtrain)
        self.work, self.log, self.cuda, self.cpu_threads = work, log, cuda, cpu_threads
        self.pin_cublas = True

    def base_env(self):
        env = {k: v for k, v in os.environ.items() if k not in RDZV_VARS}
        env.update({"OMP_NUM_THREADS": str(self.cpu_threads), "MKL_NUM_THREADS": "1"})
        if self.pin_cublas:
            # Needed by train.deterministic on CUDA (cuBLAS then picks the same kernels run to
            # run); the benchmark turns it off, as it would cost cuBLAS its workspace.
            env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        return env

    def start(self, argv, run_dir, world, rlimit_as=None):
        """Starts `world` ranks of shardtrain ARGV in run_dir with the torchrun environment
        (MASTER_PORT=0: rank 0 publishes its port in rdzv.port)."""
        port_file = os.path.join(run_dir, "rdzv.port")
        if os.path.exists(port_file):
            os.remove(port_file)
        limit = None
        # Under AddressSanitizer (scripts/sanitizer-env.sh sets ASAN_OPTIONS) the shadow memory
        # alone needs terabytes of address space, so an RLIMIT_AS kills the rank at start: the
        # trainer's own host-memory limit (its counting allocator) stands in for it there.
        sanitized = bool(os.environ.get("ASAN_OPTIONS"))
        if rlimit_as and not sanitized:
            def limit():
                resource.setrlimit(resource.RLIMIT_AS, (rlimit_as, rlimit_as))
        procs = []
        for rank in range(world):
            env = self.base_env()
            env.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                        "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": "0", "SHARDSCOPE_RDZV_FILE": port_file})
            if rlimit_as and sanitized:
                env["SHARDSCOPE_HOST_MEMORY_LIMIT"] = str(rlimit_as)
            with open(os.path.join(run_dir, f"events-rank-{rank}.jsonl"), "ab") as out, \
                    open(os.path.join(run_dir, f"rank-{rank}.log"), "ab") as err:
                procs.append(subprocess.Popen([self.shardtrain] + argv, cwd=run_dir, env=env,
                                              stdout=out, stderr=err, start_new_session=True,
                                              preexec_fn=limit))
        return procs

    def wait(self, name, procs, run_dir, timeout, started):
        deadline = started + timeout
        codes, timed_out = [], False
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.time())))
            except subprocess.TimeoutExpired:
                timed_out = True
                for q in procs:  # each rank leads its own session: end its whole group
                    if q.poll() is None:
                        os.killpg(q.pid, signal.SIGKILL)
                codes.append(p.wait())
        run = Run(name, run_dir, len(procs), codes, time.time() - started, timed_out)
        self.log(f"  run {name}: {'ok' if run.ok() else run.failure()} in {run.seconds:.1f} s")
        return run

    def train(self, name, cfg, world, timeout, extra=(), rlimit_as=None, fresh=True):
        run_dir = os.path.join(self.work, name)
        if fresh:
            shutil.rmtree(run_dir, ignore_errors=True)
            os.makedirs(run_dir)
            with open(os.path.join(run_dir, "exp.toml"), "w") as f:
                f.write(toml_text(cfg))
        argv = ["train", os.path.join(run_dir, "exp.toml"), "--run-dir", run_dir] + list(extra)
        started = time.time()
        procs = self.start(argv, run_dir, world, rlimit_as)
        return self.wait(name, procs, run_dir, timeout, started)

    def train_many(self, specs, jobs, timeout):
        """{name: (cfg, world, extra)} run `jobs` at a time; returns {name: Run}."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {name: pool.submit(self.train, name, cfg, world, timeout,
                                         tuple(extra.get("args", ())))
                       for name, (cfg, world, extra) in specs.items()}
            return {name: f.result() for name, f in futures.items()}

    def resume_copy(self, first, name, keep, timeout):
        """A copy of `first`'s run folder holding only checkpoint `keep`, resumed with
        --resume auto (so from `keep`), with fresh event files."""
        run_dir = os.path.join(self.work, name)
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.copytree(first.dir, run_dir)
        for entry in os.listdir(run_dir):
            if entry.startswith(("events-rank-", "rank-")) or entry == "rdzv.port":
                os.remove(os.path.join(run_dir, entry))
        ckpt = os.path.join(run_dir, "ckpt")
        for entry in os.listdir(ckpt):
            if entry != keep:
                shutil.rmtree(os.path.join(ckpt, entry), ignore_errors=True)
        return self.train(name, None, first.world, timeout, extra=("--resume", "auto"),
                          fresh=False)

    def command(self, name, argv, timeout):
        """shardtrain ARGV once, without a rendezvous (selftest starts its own ranks); returns
        {"dir", "code", "events", "tail"}."""
        run_dir = os.path.join(self.work, name)
        shutil.rmtree(run_dir, ignore_errors=True)
        os.makedirs(run_dir)
        started = time.time()
        with open(os.path.join(run_dir, "stdout.jsonl"), "wb") as out, \
                open(os.path.join(run_dir, "stderr.log"), "wb") as err:
            p = subprocess.Popen([self.shardtrain] + argv, cwd=run_dir, env=self.base_env(),
                                 stdout=out, stderr=err, start_new_session=True)
            try:
                code = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                code = p.wait()
        secs = time.time() - started
        self.log(f"  {name}: exit {code} in {secs:.1f} s")
        return {"dir": run_dir, "code": code,
                "events": read_events(os.path.join(run_dir, "stdout.jsonl")),
                "tail": tail(os.path.join(run_dir, "stderr.log"), 8).replace("\n", " | ")}
