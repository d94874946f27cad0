"""Running the towers of a replicated method at the same time (`SyncReplicas` with ``concurrent=True``).

A replicated method's flat trace (`harness.graph.chain`) lists its steps in the order the replicated body
called them: the broadcast and the sharder, then replica 0's steps ending in its gradient tower's ``step``,
then replica 1's, ... and last the synchronous step and the output merger. Each tower's block reads only the
sharder's outputs and its own variables, and writes only its own gradient accumulators, so the blocks are
independent.

- **PyTorch** runs a call chain step by step in Python. `schedule` replaces the towers' blocks with one step
  that runs block 0 in the calling thread and every other block in a thread of its own (PyTorch's ops
  release the GIL), and waits for all of them before the synchronous step. Each block is its own call chain
  (`build_chain` over the block's steps); its thread gets the caller's grad mode (thread-local in PyTorch).
- **TensorFlow** compiles the whole chain into one ``tf.function``: the towers' ops are independent ops of
  one graph, and TensorFlow's executor runs independent ops concurrently on its inter-op pool
  (``tf.config.threading.set_inter_op_parallelism_threads``; ``TF_NUM_INTEROP_THREADS=1`` runs them one
  after another). `schedule` leaves its chain as it is.

The towers compute the same values either way. What concurrency changes is only the order of random draws
from the executor's one generator: an update that draws random numbers inside its towers (noisy layers,
dropout) draws them in an order that depends on the threads' timing; build such a graph with
``concurrent=False``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from harness.graph import Component
from harness.graph.assembly import ApiTrace
from harness.graph.chain import build_chain
from harness.graph.decorators import GraphFnSpec
from harness.graph.records import GraphFnCall, Record, records_in

#: The name the combined step shows in a chain's source (``# <root>.towers_concurrently``).
STEP_NAME = "towers_concurrently"


def _inside(component: Component, tower: Component) -> bool:
    return component is tower or tower in component.ancestors()


def tower_blocks(trace: ApiTrace, sharder: Component, gradient_towers: Sequence[Component],
                 towers: Sequence[Component]) -> tuple[int, list[list[GraphFnCall]]] | None:
    """The towers' blocks of ``trace`` and the index of its first step, or None where the trace does not have
    the replicated method's shape.

    Block 0 is every step after the sharder's up to replica 0's gradient tower step (none of them inside a
    tower); block ``i >= 1`` the steps after block ``i - 1`` up to tower ``i``'s gradient step, all inside
    tower ``i``. Every block reads only records made before the first block (the shards).

    Args:
        trace: a replicated method's flat trace.
        sharder: the method's `BatchSharder`.
        gradient_towers: replica 0's gradient tower (the root's own) and each tower's, in replica order.
        towers: the towers of replicas 1, 2, ...
    """
    steps = trace.steps
    starts = [i for i, s in enumerate(steps) if s.component is sharder]
    if len(starts) != 1 or len(gradient_towers) != len(towers) + 1:
        return None
    first = pos = starts[0] + 1
    blocks: list[list[GraphFnCall]] = []
    for index, grad in enumerate(gradient_towers):
        ends = [i for i in range(pos, len(steps)) if steps[i].component is grad]
        if len(ends) != 1:
            return None
        block = steps[pos:ends[0] + 1]
        if index == 0:
            if any(_inside(s.component, t) for s in block for t in towers):
                return None
        elif not all(_inside(s.component, towers[index - 1]) for s in block):
            return None
        blocks.append(block)
        pos = ends[0] + 1
    made = {id(r): b for b, block in enumerate(blocks) for s in block for r in s.outputs}
    for b, block in enumerate(blocks):
        if any(made.get(id(r), b) != b for s in block for r in records_in(s.args)):
            return None  # a block reads another's output: not independent
    return first, blocks


def _block_chain(name: str, block: list[GraphFnCall], later: set[int],
                 step_fns: dict[int, Callable]) -> tuple[Callable, list[Record], list[Record]]:
    """One block as its own call chain: ``(fn, inputs, outputs)`` where ``fn(*inputs)`` returns the block's
    records that ``later`` steps (or the method's outputs) read, in ``outputs`` order (always a tuple)."""
    own = {id(r) for s in block for r in s.outputs}
    inputs = list({id(r): r for s in block for r in records_in(s.args) if id(r) not in own}.values())
    outputs = [r for s in block for r in s.outputs if id(r) in later]
    sub = ApiTrace(name=name, arg_names=tuple(f"x{i}" for i in range(len(inputs))),
                   args={f"x{i}": r for i, r in enumerate(inputs)}, constants={}, steps=list(block),
                   outputs=tuple(outputs))
    fn, _ = build_chain(sub, step_fns)
    return fn, inputs, outputs


def _thread_state(backend_name: str) -> Callable[[], Callable[[Callable[[], Any]], Any]]:
    """A function that captures the calling thread's framework state and returns a runner that applies it in
    another thread (PyTorch: grad mode, which is thread-local)."""
    if backend_name != "torch":
        return lambda: (lambda fn: fn())
    import torch

    def capture() -> Callable[[Callable[[], Any]], Any]:
        mode = torch.is_grad_enabled()

        def run(fn: Callable[[], Any]) -> Any:
            with torch.set_grad_enabled(mode):
                return fn()
        return run
    return capture


class ConcurrentTowers:
    """The step that runs the blocks: block 0 in the calling thread, the others in a pool of threads."""

    def __init__(self, chains: list[tuple[Callable, list[int], int]], backend_name: str) -> None:
        self.chains = chains  # (fn, positions of its inputs among the step's arguments, number of outputs)
        self.pool = ThreadPoolExecutor(max_workers=len(chains) - 1, thread_name_prefix="spacegraph-tower")
        self.capture = _thread_state(backend_name)

    def __call__(self, *args: Any) -> Any:
        run = self.capture()
        futures = [self.pool.submit(run, lambda fn=fn, pos=pos: fn(*(args[p] for p in pos)))
                   for fn, pos, _ in self.chains[1:]]
        fn, pos, _ = self.chains[0]
        try:
            results = [fn(*(args[p] for p in pos))]
        finally:
            results_rest = [f.result() for f in futures]  # waits for every tower, also when block 0 failed
        flat = [v for r in results + results_rest for v in r]
        return flat[0] if len(flat) == 1 else (tuple(flat) if flat else None)


def schedule(trace: ApiTrace, step_fns: dict[int, Callable], root: Component, sharder: Component,
             gradient_towers: Sequence[Component], towers: Sequence[Component],
             backend_name: str) -> tuple[ApiTrace, dict[int, Callable]]:
    """``trace`` with its towers' blocks replaced by one step that runs them concurrently, and the step
    functions with that step's; ``(trace, step_fns)`` unchanged where there is only one tower, the trace has
    not the replicated method's shape (`tower_blocks`) or the backend is TensorFlow (see the module)."""
    found = tower_blocks(trace, sharder, gradient_towers, towers) if towers and backend_name == "torch" else None
    if found is None:
        return trace, step_fns
    first, blocks = found
    rest = trace.steps[first + sum(len(b) for b in blocks):]
    later = {id(r) for s in rest for r in records_in(s.args)} | {id(r) for r in records_in(trace.outputs)}
    chains, args, outputs = [], {}, []
    for i, block in enumerate(blocks):
        fn, inputs, outs = _block_chain(f"{trace.name}_tower_{i}", block, later, step_fns)
        for r in inputs:
            args.setdefault(id(r), (len(args), r))
        chains.append((fn, [args[id(r)][0] for r in inputs], len(outs)))
        outputs.extend(outs)
    runner = ConcurrentTowers(chains, backend_name)
    spec = GraphFnSpec(name=STEP_NAME, fn=runner, arg_names=tuple(f"x{i}" for i in range(len(args))),
                       returns=len(outputs), gradients=any(s.spec.records for b in blocks for s in b))
    step = GraphFnCall(component=root, spec=spec, args=tuple(r for _, r in args.values()), outputs=outputs)
    new = ApiTrace(name=trace.name, arg_names=trace.arg_names, args=trace.args, constants=trace.constants,
                   steps=[*trace.steps[:first], step, *rest], calls=trace.calls, outputs=trace.outputs)
    return new, {**step_fns, id(step): runner}
