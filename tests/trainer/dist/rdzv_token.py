"""The rendezvous belongs to the run (issue 29, item 7): real `shardtrain selftest` ranks over a
real TCPStore, and a foreign client that is torch's own TCPStore client.

  - two ranks with the same SHARDSCOPE_RDZV_TOKEN meet and pass the selftest;
  - a rank with another token, or with none, refuses rank 0's store (exit 2, `config`, naming
    what differs) before it registers; a rank with a token refuses a rank 0 without one;
  - a foreign client that registers as rank 1 without presenting the token, or with a wrong
    proof, makes rank 0 refuse it (exit 2, `config`, naming rank 1) before any collective;
  - the rendezvous-port file rank 0 publishes is 0600 from its creation.
"""
import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from datetime import timedelta

TIMEOUT_S = 8
TOKEN_A = "a" * 8 + "0123456789abcdef0123456789abcdef"
TOKEN_B = "b" * 8 + "0123456789abcdef0123456789abcdef"


class CheckFailed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise CheckFailed(message)


def rank_env(rank, world, port_file, token):
    env = dict(os.environ)
    env.pop("SHARDSCOPE_RDZV_TOKEN", None)
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT="0",
               SHARDSCOPE_RDZV_FILE=port_file, OMP_NUM_THREADS="1")
    if token is not None:
        env["SHARDSCOPE_RDZV_TOKEN"] = token
    return env


def start(args, rank, world, port_file, token):
    return subprocess.Popen([args.shardtrain, "selftest", "--timeout-s", str(TIMEOUT_S)],
                            env=rank_env(rank, world, port_file, token), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p, timeout=60):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    return p.returncode, [e for e in events if e["ev"] == "error"], err


def fresh(args, name):
    path = os.path.join(args.work, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return os.path.join(path, "rendezvous-port")


def wait_port(port_file, proc):
    deadline = time.time() + 30
    while time.time() < deadline:
        if os.path.exists(port_file) and open(port_file).read().strip():
            return int(open(port_file).read())
        if proc.poll() is not None:
            raise CheckFailed(f"rank 0 ended before it published its port: {finish(proc)}")
        time.sleep(0.02)
    raise CheckFailed("rank 0 published no port within 30 s")


def same_token(args):
    port_file = fresh(args, "same")
    procs = [start(args, r, 2, port_file, TOKEN_A) for r in range(2)]
    results = [finish(p) for p in procs]
    print(f"same token: exit codes {[r[0] for r in results]}")
    check(all(r[0] == 0 for r in results), f"ranks with the same token failed: {results}")


def rank_refuses(args, name, token0, token1, want):
    port_file = fresh(args, name)
    rank0 = start(args, 0, 2, port_file, token0)
    rank1 = start(args, 1, 2, port_file, token1)
    code, errors, err = finish(rank1)
    rank0.kill()
    finish(rank0)
    print(f"{name}: rank 1 exit {code}, errors {errors}")
    check(code == 2 and len(errors) == 1 and errors[0]["kind"] == "config"
          and "is not this run's" in errors[0]["message"] and want in errors[0]["message"]
          and "SHARDSCOPE_RDZV_TOKEN" in errors[0]["hint"],
          f"{name}: want rank 1 to refuse rank 0's store with a config error saying '{want}', "
          f"got exit {code}, {errors}\n{err}")


def foreign_client(args, name, proof, want):
    import torch.distributed as dist
    port_file = fresh(args, name)
    rank0 = start(args, 0, 2, port_file, TOKEN_A)
    port = wait_port(port_file, rank0)
    mode = stat.S_IMODE(os.stat(port_file).st_mode)
    check(mode == 0o600, f"{port_file} has mode {oct(mode)}, want 0o600")
    client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=10),
                           wait_for_workers=False)
    nonce = client.get("shardscope/auth/nonce").decode()
    check(len(nonce) == 32 and TOKEN_A not in client.get("shardscope/auth/server").decode(),
          "the store holds the token itself, not a proof")
    if proof is not None:
        client.set("shardscope/auth/rank/1", proof)
    client.add("shardscope/rank/1", 1)
    client.set("shardscope/world/1", "2")
    code, errors, err = finish(rank0)
    print(f"{name}: rank 0 exit {code}, errors {errors}")
    check(code == 2 and len(errors) == 1 and errors[0]["kind"] == "config"
          and "refused the process that registered as rank 1" in errors[0]["message"]
          and want in errors[0]["message"],
          f"{name}: want rank 0 to refuse the foreign client with a config error saying "
          f"'{want}', got exit {code}, {errors}\n{err}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shardtrain", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    try:
        same_token(args)
        rank_refuses(args, "another_token", TOKEN_A, TOKEN_B, "holds another run token")
        rank_refuses(args, "rank_without_token", TOKEN_A, None,
                     "holds a run token (SHARDSCOPE_RDZV_TOKEN) and this rank has none")
        rank_refuses(args, "rank0_without_token", None, TOKEN_A, "its rank 0 has no run token")
        foreign_client(args, "foreign_no_token", None, "it presented no run token")
        foreign_client(args, "foreign_wrong_proof", "0" * 64, "its run token is not this run's")
    except CheckFailed as e:
        print(f"FAIL: {e}")
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
