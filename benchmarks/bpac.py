"""B-PAC beside online G-PAC and offline G-PAC on the closed-form populations: a head-to-head.

``python benchmarks/bpac.py [--n-trials N] [--stream-length N] [--label-prob P]`` prints, per population
(one group; three groups), each method's share answered without a thinking call, paid labels and worst
per-group anytime violation rate. The runners live in :mod:`gpac_utils.online_streams` (notebook 33 and
tests/test_online.py use them too).
"""

from __future__ import annotations

import argparse

from gpac_utils import online
from gpac_utils.online import OnlineSettings
from gpac_utils.online_streams import closed_form_risk, closed_form_streams, head_to_head


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-trials", type=int, default=50)
    parser.add_argument("--stream-length", type=int, default=5000)
    parser.add_argument("--label-prob", type=float, default=0.1)
    args = parser.parse_args(argv)
    grid = online.grid_points(101)
    for name, pop in {
        "one group": dict(probs=(1.0,), a=(0.3,), k=(1,)),
        "three groups": dict(probs=(0.5, 0.3, 0.2), a=(0.3, 0.6, 1.0), k=(1, 1, 2)),
    }.items():
        u, loss, g = closed_form_streams(args.n_trials, args.stream_length, **pop, seed=1)
        out = head_to_head(
            u,
            loss,
            g,
            len(pop["probs"]),
            closed_form_risk(pop["a"], pop["k"]),
            OnlineSettings(eps=0.1, alpha=0.05, label_prob=args.label_prob, grid=tuple(grid)),
        )
        for method, row in out.items():
            print(name, "|", method, "|", {k: round(v, 4) for k, v in row.items()})


if __name__ == "__main__":
    main()
