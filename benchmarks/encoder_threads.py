"""Two processes embedding at once on a shared machine: onnxruntime's default threads against one thread each.

Each process embeds the same 800 texts with all-MiniLM-L6-v2 (ONNX int8) after one warm-up batch; the two run
at the same time, as two pytest-xdist workers do. Prints the wall time and CPU time of each process, per setting
(``RETRIEVAL_PIPELINE_THREADS`` unset, then 1).

    .venv/bin/python benchmarks/encoder_threads.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

TEXTS = 800


def child() -> None:
    from retrieval_pipeline.core.retrieval.models.encoders import OnnxInt8Encoder

    encoder = OnnxInt8Encoder()
    texts = [f"def function_{i}(x, y): return the parsed value of field {i} from the JSON document with options " * 3 for i in range(TEXTS)]
    encoder.encode(texts[:8])
    wall, cpu = time.perf_counter(), time.process_time()
    encoder.encode(texts)
    print(f"wall {time.perf_counter() - wall:6.1f} s, cpu {time.process_time() - cpu:6.1f} s", flush=True)


def main() -> None:
    for threads in (None, "1"):
        env = {k: v for k, v in os.environ.items() if k != "RETRIEVAL_PIPELINE_THREADS"}
        if threads:
            env["RETRIEVAL_PIPELINE_THREADS"] = threads
        procs = [subprocess.Popen([sys.executable, __file__, "--child"], env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=1800)[0].strip() for p in procs]
        print(f"RETRIEVAL_PIPELINE_THREADS={threads or 'unset'}: " + " | ".join(outs), flush=True)


if __name__ == "__main__":
    child() if sys.argv[1:] == ["--child"] else main()
