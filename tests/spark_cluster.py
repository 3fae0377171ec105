"""A throwaway standalone Spark cluster (one master, one worker) on 127.0.0.1 for the tests.

``python tests/spark_cluster.py start DIR`` starts Spark's standalone master and one worker
from the jars PySpark bundles (``SPARK_HOME`` is the ``pyspark`` package directory), both
bound to 127.0.0.1 on free ports, the worker with little memory and few cores
(``--memory``/``--cores``, default 1g and 1 core), waits until the worker is registered
(the master's JSON status page lists it ALIVE), and prints the master URL
(``spark://127.0.0.1:PORT``) on stdout. Their process ids are kept in ``DIR/*.pid`` and
their logs in ``DIR/*.log``. ``python tests/spark_cluster.py stop DIR`` stops both.
``scripts/test`` does both and exports the URL as ``PLANNER_TEST_SPARK_MASTER``; the test
fixtures start one themselves when that is unset (a developer running pytest alone). On
failure the reason is printed on stderr and the exit status is 1; the fixtures then skip
the cluster cases, saying why.

The executors read the data files by the paths the driver names: on one machine a local
path is readable by both. The worker starts Python workers with ``PYSPARK_PYTHON`` (this
interpreter unless set), the same Python as the driver's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """The directory of the installed ``pyspark`` package (its ``bin/`` and ``jars/``)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("PySpark is not installed (pip install '.[spark]')")
    home = Path(spec.origin).parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        raise RuntimeError(f"PySpark at {home} has no bin/spark-class or jars/: cannot start a cluster")
    return home


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(directory: Path) -> dict[str, str]:
    """The environment of the master and the worker (and of a driver connecting to them)."""
    env = dict(os.environ)
    env["SPARK_HOME"] = str(spark_home())
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_LOG_DIR"] = str(directory)
    env["SPARK_WORKER_DIR"] = str(directory / "work")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.pop("SPARK_CONF_DIR", None)
    # no REST submission server: it listens on a fixed port (6066) that a second cluster
    # on the machine would want too
    env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"
    return env


def _launch(directory: Path, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    home = Path(env["SPARK_HOME"])
    log = open(directory / f"{name}.log", "wb")  # the child holds its own copy
    proc = subprocess.Popen(
        ["bash", str(home / "bin" / "spark-class"), *args],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        start_new_session=True,
    )
    log.close()
    (directory / f"{name}.pid").write_text(str(proc.pid))
    return proc


def _status(webui: int) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui}/json/", timeout=2) as r:
            out: dict[str, object] = json.loads(r.read().decode())
            return out
    except (OSError, ValueError):
        return None


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-600:].strip() if path.exists() else "(no log)"


def start(directory: Path, memory: str = "1g", cores: int = 1, timeout: float = 120.0) -> str:
    """Start a master and one worker; return the master URL. Raises RuntimeError saying why not."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("no Java runtime: Spark needs Java 17+ (apt-get install default-jre-headless)")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "work").mkdir(exist_ok=True)
    env = environment(directory)
    port, webui, worker_ui = _free_port(), _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    # both JVMs start at once (each takes seconds); the worker retries until the master is up
    master = _launch(directory, "master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port),
                                           "--webui-port", str(webui)], env)
    worker = _launch(directory, "worker", [WORKER_CLASS, "--host", "127.0.0.1", "--cores", str(cores),
                                           "--memory", memory, "--webui-port", str(worker_ui),
                                           "--work-dir", str(directory / "work"), url], env)
    deadline = time.monotonic() + timeout
    try:
        while True:
            status = _status(webui) or {}
            workers = status.get("workers") or []
            if isinstance(workers, list) and any(isinstance(w, dict) and w.get("state") == "ALIVE" for w in workers):
                break
            for name, proc in (("master", master), ("worker", worker)):
                if proc.poll() is not None:
                    raise RuntimeError(f"the Spark {name} exited ({proc.returncode}): "
                                       f"{_tail(directory / f'{name}.log')}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no Spark worker registered with the master in {timeout:.0f} s: "
                                   f"{_tail(directory / 'worker.log')}")
            time.sleep(0.25)
    except BaseException:
        stop(directory)
        raise
    (directory / "url").write_text(url)
    return url


def _stop_pid(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                # reap it when it is our child (started in this process), else poll it
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            except ChildProcessError:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
            time.sleep(0.1)
        else:
            continue
        break
    pid_file.unlink(missing_ok=True)


def stop(directory: Path) -> None:
    """Stop the worker, then the master, of the cluster in ``directory`` (quietly if not running)."""
    for name in ("worker", "master"):
        _stop_pid(directory / f"{name}.pid")


def session_on(master: str) -> Any:
    """A Spark session on ``master`` made by the product's own
    :func:`planner.data.backends.spark_backend.get_session`. A process holds one Spark
    context, so a session running on another master is stopped first (the tests switch
    between ``local[2]`` and the cluster; the product itself refuses to switch)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from planner.data.backends.spark_backend import get_session

    running = SparkContext._active_spark_context
    if running is not None and str(running.master) != master:
        (SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()).stop()
    return get_session(master)


def local_session() -> Any:
    """The tests' local Spark session (``local[2]``), or the test skipped with the reason when
    Java or PySpark is absent; a session running on another master (the cluster of
    ``test_spark_cluster.py``) is stopped first (:func:`session_on`)."""
    import pytest

    from planner.data.backends.spark_backend import java_available

    if not java_available():
        print("SKIP spark tests: no Java runtime (install default-jre-headless)")
        pytest.skip("no Java runtime: Spark tests need Java 17+ (apt-get install default-jre-headless)")
    pytest.importorskip("pyspark")
    return session_on("local[2]")


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("start", "stop"):
        print("usage: spark_cluster.py start DIR [MEMORY [CORES]] | stop DIR", file=sys.stderr)
        return 2
    directory = Path(argv[1])
    if argv[0] == "stop":
        stop(directory)
        return 0
    memory = argv[2] if len(argv) > 2 else "1g"
    cores = int(argv[3]) if len(argv) > 3 else 1
    try:
        print(start(directory, memory, cores))
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
