"""`workbench plan`: detect parallel structure and one-to-one block maps; propose a fusion plan."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from workbench.session_args import session_from_args


def register(sub, model_cmd) -> None:
    p = model_cmd("plan", "propose fusion decisions: parallel operators (horizontal) and one-to-one "
                  "block maps (block-level vertical)")
    p.add_argument("--target", default="llvm", choices=["llvm", "cuda"], help="code generation target")
    p.add_argument("--arch", help="target architecture: llvm -mcpu name or cuda sm_XX / tag")
    p.add_argument("--out", metavar="FILE", help="write the plan (JSON) here, for compile --plan")
    p.add_argument("--approve", metavar="all|none|ID,..", default="none",
                   help="mark these decisions approved in the written plan (default none)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(run=plan_cmd)


def plan_cmd(args) -> int:
    from engine.files import write_atomic
    from engine.parallel import propose

    session = session_from_args(args)
    proposal = propose(session, args.target, args.arch)
    plan = proposal.plan.with_approval(args.approve)
    if args.out:
        write_atomic(Path(args.out), plan.dumps())
    if args.json:
        sys.stdout.write(json.dumps(plan.to_json(), indent=1) + "\n")
    else:
        print_plan(plan, proposal.groups)
        if args.out:
            print(f"wrote        {args.out}")
    return 0


def print_plan(plan, groups) -> None:
    print(f"model        {plan.model}   target {plan.target}   fingerprint {plan.fingerprint}")
    print(f"groups       {len(groups)} fork/join groups, {len(plan.decisions)} decisions")
    for g in groups:
        print(f"  {g.describe()}")
    for d in plan.decisions:
        ev, gain = d.evidence, d.gain
        where = f"edge {ev.fork}" if ev.link else f"stage {d.stage}  fork {ev.fork}"
        print(f"\n{d.id:<4} {d.kind.value:<13} {d.status.value:<9} {where}"
              f"{'  heterogeneous' if ev.heterogeneous and not ev.link else ''}")
        for m in d.members:
            print(f"       k{m.kernel:<3} {', '.join(m.labels)[:44]:<44} {m.signature[:22]:<22} "
                  f"{'x'.join(map(str, m.out_shape)):<14} {m.flops / 1e6:>8.2f} MFLOP  {m.chunks:>5} chunks")
        if ev.link:
            print(f"     legal: {ev.link.describe()}; no other path joins them")
        else:
            print(f"     legal: no path {ev.no_path}, no member reads another {ev.no_member_reads_another}, "
                  f"inputs ready after k{ev.launch_after}, first consumer k{ev.first_consumer}"
                  f"{' (reorders independent kernels)' if ev.reorder_needed else ''}")
        print(f"     gain (estimate): {gain.launches_saved} launches and {gain.parallel_regions_saved} "
              f"parallel regions saved, utilisation {gain.utilisation_before:.0%} -> "
              f"{gain.utilisation_after:.0%}, ~{gain.estimated_us:.1f} us")
        for note in ev.dropped:
            print(f"     dropped: {note}")
        if d.reason:
            print(f"     reason: {d.reason}")
