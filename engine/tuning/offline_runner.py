"""Time the candidates of an offline batch on this machine's device (engine.tuning.offline).

    python offline_runner.py DIR [--repeat 5] [--min-repeat-ms 20]

Needs only the TVM runtime and numpy (no compiler, no blockwise): loads DIR/candidates.so,
times every function listed in DIR/manifest.json on random inputs and writes
DIR/timings.json = {"device": ..., "seconds": {symbol: [per-repeat seconds]}, "errors": {...}}.
"""

import argparse
import json
import os
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--min-repeat-ms", type=int, default=20)
    args = ap.parse_args(argv)

    import numpy as np
    import tvm

    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    lib = tvm.runtime.load_module(os.path.join(args.dir, manifest["library"]))
    dev = tvm.runtime.device(manifest["device"], 0)
    rng = np.random.default_rng(0)
    seconds, errors = {}, {}
    for cand in manifest["candidates"]:
        try:
            tensors = [tvm.runtime.tensor(rng.standard_normal(a["shape"]).astype(a["dtype"]), dev)
                       for a in cand["args"]]
            timer = lib.time_evaluator(cand["symbol"], dev, number=1, repeat=args.repeat,
                                       min_repeat_ms=args.min_repeat_ms)
            seconds[cand["symbol"]] = list(timer(*tensors).results)
        except Exception as err:  # pylint: disable=broad-except
            errors[cand["symbol"]] = str(err).splitlines()[0] if str(err) else type(err).__name__
    with open(os.path.join(args.dir, "timings.json"), "w") as f:
        json.dump({"device": str(dev), "seconds": seconds, "errors": errors}, f)
    print(f"timed {len(seconds)} candidates, {len(errors)} failed -> {args.dir}/timings.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
