"""`workbench plan`: detect parallel structure and one-to-one block maps; propose a fusion plan."""

from __future__ import annotations

import json
from pathlib import Path

from engine.files import write_atomic
from workbench.args import add_target_arguments, session_from_args
from workbench.present.plan import plan_lines


def register(sub, model_cmd) -> None:
    p = model_cmd("plan", "propose fusion decisions: parallel operators (horizontal) and one-to-one "
                  "block maps (block-level vertical)")
    add_target_arguments(p)
    p.add_argument("--out", metavar="FILE", help="write the plan (JSON) here, for compile --plan")
    p.add_argument("--approve", metavar="all|none|ID,..", default="none",
                   help="mark these decisions approved in the written plan (default none)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(run=plan_cmd)


def plan_cmd(args) -> int:
    session = session_from_args(args)
    proposal = session.propose(args.target, args.arch)
    plan = proposal.plan.with_approval(args.approve)
    if args.out:
        write_atomic(Path(args.out), plan.dumps())
    if args.json:
        print(json.dumps(plan.to_json(), indent=1))
        return 0
    print("\n".join(plan_lines(plan, proposal.groups)))
    if args.out:
        print(f"wrote        {args.out}")
    return 0
