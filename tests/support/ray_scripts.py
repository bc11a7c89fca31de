"""The job entrypoints the Ray scenarios submit: small programs that fail the real way."""

from __future__ import annotations

HOLDER_S1 = """
import ray
ray.init(namespace="pc-s1")

@ray.remote(num_cpus=0)
class Lock:
    def ping(self):
        return "ok"

lock = Lock.options(name="trainer_lock", lifetime="detached").remote()
print("holder:", ray.get(lock.ping.remote()))
"""

CLASH_S1 = """
import ray
ray.init(namespace="pc-s1")

@ray.remote(num_cpus=0)
class Lock:
    def ping(self):
        return "ok"

lock = Lock.options(name="trainer_lock", namespace="pc-s1").remote()
print("clash:", ray.get(lock.ping.remote()))
"""

MISSING_S2 = """
print("loading the model code")
import flash_attn_pitcrew_missing  # noqa: F401
"""

APP_S3 = """
def load_reward_manager(config):
    return config["reward_kwargs"]

def main():
    print("step:1 - actor/pg_loss:0.0213")
    load_reward_manager({"reward_fn": "gsm8k"})

main()
"""

VERL_S4 = """
import time
import ray
ray.init(namespace="verl-s4")

@ray.remote(num_cpus=0)
class RegisterCenter:
    def ping(self):
        return "ok"

center = RegisterCenter.options(name="abcdef_register_center").remote()
print("register center", ray.get(center.ping.remote()), flush=True)
time.sleep(600)
"""

CLASH_S4 = """
import ray
ray.init(namespace="verl-s4")

@ray.remote(num_cpus=0)
class RegisterCenter:
    def ping(self):
        return "ok"

center = RegisterCenter.options(name="abcdef_register_center", namespace="verl-s4").remote()
print(ray.get(center.ping.remote()))
"""

# The Slack end-to-end test's pair (tests/e2e/slack): the same clash in a namespace of its own.
HOLDER_SLACK = HOLDER_S1.replace("pc-s1", "pc-slack").replace("trainer_lock", "slack_lock")
CLASH_SLACK = CLASH_S1.replace("pc-s1", "pc-slack").replace("trainer_lock", "slack_lock")

EXIT_3 = """
import sys
print("giving up on purpose")
sys.exit(3)
"""

# Evidence bundles (tests/e2e/kubernetes): an actor's process dies, so does the driver.
ACTOR_DIES = """
import os
import ray
ray.init()

@ray.remote(num_cpus=0, max_restarts=0)
class Trainer:
    def step(self):
        os._exit(1)

trainer = Trainer.remote()
print("training step 1", flush=True)
ray.get(trainer.step.remote())
"""

SLEEP = """
import time
print("training", flush=True)
time.sleep(600)
"""

WARMUP = """
import ray
ray.init()
print("warm", ray.cluster_resources())
"""

# Issue 12: drivers that pin their namespace with `ray.init(namespace=...)` and name the
# actor without `.options(namespace=...)`, so Ray prints `(namespace=None)`.
HOLDER_NS = """
import ray
ray.init(namespace="grpo-h12")

@ray.remote(num_cpus=0)
class Lock:
    def ping(self):
        return "ok"

lock = Lock.options(name="grpo_lock", lifetime="detached").remote()
print("holder:", ray.get(lock.ping.remote()))
"""

CLASH_NS = """
import ray
ray.init(namespace="grpo-h12")

@ray.remote(num_cpus=0)
class Lock:
    def ping(self):
        return "ok"

lock = Lock.options(name="grpo_lock").remote()
print("clash:", ray.get(lock.ping.remote()))
"""

LIVE_HOLDER_NS = """
import time
import ray
ray.init(namespace="grpo-h12-live")

@ray.remote(num_cpus=0)
class Lock:
    def ping(self):
        return "ok"

lock = Lock.options(name="grpo_lock", lifetime="detached").remote()
print("holder:", ray.get(lock.ping.remote()), flush=True)
time.sleep(600)
"""

CLASH_LIVE_NS = CLASH_NS.replace("grpo-h12", "grpo-h12-live")

SCRIPTS = {
    "warmup.py": WARMUP,
    "sleep.py": SLEEP,
    "holder_s1.py": HOLDER_S1,
    "clash_s1.py": CLASH_S1,
    "missing_s2.py": MISSING_S2,
    "app_s3.py": APP_S3,
    "verl_s4.py": VERL_S4,
    "clash_s4.py": CLASH_S4,
    "exit_3.py": EXIT_3,
    "actor_dies.py": ACTOR_DIES,
    "holder_slack.py": HOLDER_SLACK,
    "clash_slack.py": CLASH_SLACK,
    "holder_ns.py": HOLDER_NS,
    "clash_ns.py": CLASH_NS,
    "live_holder_ns.py": LIVE_HOLDER_NS,
    "clash_live_ns.py": CLASH_LIVE_NS,
}
