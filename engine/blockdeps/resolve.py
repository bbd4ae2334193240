"""Find kernels and edges by what users type: kernel index (#3 or 3), PrimFunc name,
`main` var, operator label (fire2/squeeze1x1) or op id.

>>> # resolve_edge(deps, "fire2/squeeze1x1:fire2/expand3x3").consumer.func
>>> # -> 'fused_conv2d3_add2_relu2'
"""

from __future__ import annotations

import difflib

from .facts import EdgeBlockMap, KernelRef, ModelBlockDeps


def _names(ref: KernelRef) -> list[str]:
    return [f"k{ref.index}", f"#{ref.index}", str(ref.index), ref.func, ref.var, *ref.labels, *ref.ops]


def resolve_kernel(kernels: tuple[KernelRef, ...], name: str) -> tuple[int, ...]:
    """Indices of kernels `name` designates: exact names first, then label prefixes
    (`fire2/squeeze1x1` also matches the fused `fire2/squeeze1x1/relu`)."""
    exact = tuple(k.index for k in kernels if name in _names(k))
    if exact:
        return exact
    return tuple(k.index for k in kernels if any(l.startswith(name + "/") for l in k.labels))


def resolve_edge(deps: ModelBlockDeps, spec: str) -> EdgeBlockMap:
    """The edge `PRODUCER:CONSUMER` designates; BlockDepsError with one line otherwise."""
    from .analysis import BlockDepsError

    splits = [(spec[:i], spec[i + 1:]) for i, ch in enumerate(spec) if ch == ":"]
    if not splits:
        raise BlockDepsError(f"bad --edge '{spec}': expected PRODUCER:CONSUMER")
    tried = []
    for prod, cons in splits:
        ps, cs = resolve_kernel(deps.kernels, prod), resolve_kernel(deps.kernels, cons)
        if not ps or not cs:
            tried.append((prod, cons, ps, cs))
            continue
        found = [e for e in deps.edges if e.producer.index in ps and e.consumer.index in cs]
        if len(found) == 1:
            return found[0]
        if not found:
            raise BlockDepsError(f"no kernel edge from '{prod}' (kernel {_list(ps)}) to '{cons}' "
                                 f"(kernel {_list(cs)})")
        pairs = ", ".join(f"k{e.producer.index}:k{e.consumer.index}" for e in found[:6])
        raise BlockDepsError(f"--edge '{spec}' is ambiguous: {pairs}; use kernel indices (#N:#M)")
    prod, cons, ps, cs = tried[0]
    unknown = prod if not ps else cons
    raise BlockDepsError(f"unknown kernel '{unknown}' in --edge '{spec}'{_suggest(deps.kernels, unknown)}")


def _list(indices) -> str:
    return ", ".join(f"k{i}" for i in indices[:6]) + (" ..." if len(indices) > 6 else "")


def _suggest(kernels, name: str) -> str:
    pool = sorted({n for k in kernels for n in _names(k) if not n.isdigit()})
    close = difflib.get_close_matches(name, pool, n=3, cutoff=0.5)
    return f"; did you mean {', '.join(close)}?" if close else "; names: kernel index (#N), PrimFunc, var or op label"
