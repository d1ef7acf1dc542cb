"""Advice, the Python API's door to it: :func:`advise` says what to change so that a step fits.

The step is estimated as it is (the baseline), then with each memory-saving technique applied
alone by memprof to the objects its inputs factory returns (:mod:`memprof.sources.fake.techniques`:
modules wrapped for activation checkpointing, the optimizer rebuilt, the call wrapped in
autocast), each on fake tensors with the estimate's engine, its floating-point operations
counted on the same run. With a budget, combinations are searched for the one that fits with
the least added compute, each candidate estimated as a whole; ``verify`` applies that plan
for real on this machine and measures it with ``memprof run``'s engine. The command line's
``memprof advise`` calls it.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memprof.core.errors import UsageError, UserCodeError, param
from memprof.core.units import format_bytes
from memprof.library.estimating import (
    _capacity_bytes,
    _check_arguments,
    _device_memory,
    _estimate_device,
    _needed,
)
from memprof.model.advice import Advice, AdviceBaseline, AdvicePlan, AdvisedTechnique
from memprof.model.recorded import Source
from memprof.model.report import Report
from memprof.model.run import RunResult
from memprof.pipeline import build_report
from memprof.sources.options import EstimateOptions, StatusFn
from memprof.sources.targets.target import Inputs, InputsFactory, Target

MAX_PLAN_ESTIMATES = 32
"""Combinations a plan's search estimates at most (beyond the techniques alone)."""
MAX_CLOSEST_ESTIMATES = 64
"""Combinations estimated at most when nothing fits, in search of the closest."""


@dataclass
class _Tried:
    """One estimated combination: its run, the bytes it needs, its FLOPs (a step of it)."""

    run: RunResult
    needed: int
    flops: int | None


def advise(
    fn: Callable[..., Any] | str,
    *,
    device: str = "cuda",
    capacity: int | str | None = None,
    gpu: str | None = None,
    budget: int | str | None = None,
    reserve: int | str | None = None,
    inputs: InputsFactory | None = None,
    inputs_kwargs: Mapping[str, Any] | None = None,
    batch_param: str | None = None,
    world_size: int | None = None,
    verify: bool = False,
    warmup: int = 1,
    status: StatusFn | None = None,
    timeout: float | None = None,
) -> Report:
    """What to change so that ``fn``'s step fits: memory-saving techniques tried on fake
    tensors, ranked by what they save, and with a budget a plan.

    ``fn`` (a callable or ``pkg.mod:func``) and ``inputs``/``inputs_kwargs`` as in
    :func:`memprof.estimate`; the techniques are applied to the objects the factory returns.
    ``report.advice`` (:class:`memprof.model.Advice`) holds the baseline and each technique
    tried alone (its footprint, saving, extra FLOPs, the line of code that applies it, or why
    it does not apply). ``capacity``/``gpu`` (with ``reserve``, as for an estimate) or
    ``budget`` (the bytes the step may need: no reserve): ``report.advice.plan`` is the
    combination that fits with the least extra FLOPs, estimated as a whole, or the closest when
    nothing fits (``plan.fits`` false). ``batch_param``: the factory's batch parameter, for a
    smaller micro-batch with gradient accumulation (its value from ``inputs_kwargs`` or the
    factory's default). ``world_size``: try FSDP2 over that many GPUs (``fully_shard`` on each
    repeated block and the model, the optimizer rebuilt; rank 0 of the job estimated on torch's
    fake process group). On CUDA the optimizer's state on the CPU is tried too (torchao's
    ``CPUOffloadOptimizer`` as it works; the host's memory is out of the device's figures).
    ``verify``: the plan applied for real on this machine's device (the CPU: estimate with
    ``device="cpu"``) and measured (``plan.measured_footprint_bytes``), which needs a budget.
    ``timeout``: seconds the advice may take (default: no limit).

    >>> step = "memprof.examples.gpt:train_step"
    >>> report = memprof.advise(step, device="cpu", budget="40MB")  # doctest: +SKIP
    >>> report.advice.plan.techniques  # doctest: +SKIP
    """
    from memprof.sources.deadline import time_limit

    with time_limit(timeout):
        return _advised(
            fn,
            device,
            (capacity, gpu, budget, reserve),
            inputs,
            inputs_kwargs,
            batch_param,
            world_size,
            verify,
            warmup,
            status,
        )


def _advised(
    fn: Callable[..., Any] | str,
    device: str,
    memory: tuple[int | str | None, str | None, int | str | None, int | str | None],
    inputs: InputsFactory | None,
    inputs_kwargs: Mapping[str, Any] | None,
    batch_param: str | None,
    world_size: int | None,
    verify: bool,
    warmup: int,
    status: StatusFn | None,
) -> Report:
    """:func:`advise` (``memory``: its capacity, gpu, budget and reserve), within its time limit."""
    capacity, gpu, budget, reserve = memory
    modelled = _estimate_device(device)
    _check_arguments(warmup, False, True)
    usable, card_name = _usable(capacity, gpu, budget, reserve, modelled)
    if verify and usable is None:
        raise UsageError(
            f"{param('verify')} measures the plan for a budget; give {param('budget')}, {param('capacity')} "
            f"or {param('gpu')}"
        )
    _check_verify(verify, modelled, world_size)
    options = EstimateOptions(device=modelled, warmup=warmup, capacity_bytes=usable)
    alone = _Alone.of(fn, inputs, inputs_kwargs, (batch_param, world_size), options, status)
    advisor, base = alone.advisor, alone.base
    ranked = _ranked(alone.techniques, alone.attempts, alone.refusals, base)
    runs = {"baseline": base.run}
    plan = None
    if usable is not None:
        found = alone.planner().plan(usable)
        plan = _plan_of(found, advisor, base, usable, card_name)
        if found[0]:
            runs["plan"] = replace(advisor.tried(found[0]).run, label="plan")
        if verify:
            plan = _verified(plan, advisor, found[0], status)
    advice = Advice(
        needed="reserved_peak_bytes" if modelled == "cuda" else "footprint_bytes",
        baseline=AdviceBaseline(
            footprint_bytes=_footprint(base.run), needed_bytes=base.needed, flops=base.flops
        ),
        techniques=tuple(ranked),
        plan=plan,
    )
    from memprof.sources.fake.run import estimate_environment

    return build_report(
        target=advisor.target.spec,
        device=modelled,
        runs=runs,
        environment=estimate_environment(modelled, card_name),
        source=Source(kind="estimate"),
        detail=advice,
    )


def plans(
    fn: Callable[..., Any] | str,
    budgets: Sequence[int | str],
    *,
    device: str = "cuda",
    inputs: InputsFactory | None = None,
    inputs_kwargs: Mapping[str, Any] | None = None,
    batch_param: str | None = None,
    world_size: int | None = None,
    warmup: int = 1,
    status: StatusFn | None = None,
) -> list[AdvicePlan]:
    """The plan for each of ``budgets`` (bytes the step may need, or sizes such as ``"24GB"``),
    as :func:`advise` makes it, from one set of estimates: each combination of techniques is
    estimated once, whatever the number of budgets. On CUDA what a step needs is its reserve on
    a device without limit."""
    modelled = _estimate_device(device)
    _check_arguments(warmup, False, True)
    usable = [_usable(None, None, budget, None, modelled)[0] for budget in budgets]
    _check_verify(False, modelled, world_size)
    options = EstimateOptions(device=modelled, warmup=warmup)
    alone = _Alone.of(fn, inputs, inputs_kwargs, (batch_param, world_size), options, status)
    planner = alone.planner()
    return [_plan_of(planner.plan(b), alone.advisor, alone.base, b, None) for b in usable if b is not None]


@dataclass
class _Alone:
    """The baseline and each technique tried alone."""

    advisor: _Advisor
    base: _Tried
    techniques: list[Any]
    refusals: list[Any]
    attempts: dict[str, _Tried | UserCodeError]

    @classmethod
    def of(
        cls,
        fn: Callable[..., Any] | str,
        inputs: InputsFactory | None,
        inputs_kwargs: Mapping[str, Any] | None,
        knobs: tuple[str | None, int | None],
        options: EstimateOptions,
        status: StatusFn | None,
    ) -> _Alone:
        """``knobs``: the factory's batch parameter and the GPUs to shard over (or None)."""
        from memprof.sources.targets.target import resolve

        target = resolve(fn) if isinstance(fn, str) else Target.of(fn)
        advisor = _Advisor(target, inputs, dict(inputs_kwargs or {}), options, status)
        batch_param, world_size = knobs
        batch = _batch_value(target, inputs, advisor.params, batch_param)
        base = advisor.baseline()
        techniques, refusals = advisor.discover(batch_param, batch, world_size)
        attempts = {t.key: advisor.attempt((t,)) for t in techniques}
        return cls(advisor, base, techniques, refusals, attempts)

    def planner(self) -> _Planner:
        tried = {key: found for key, found in self.attempts.items() if isinstance(found, _Tried)}
        return _Planner(self.advisor, self.base, self.techniques, tried)


def _ranked(
    techniques: list[Any], attempts: dict[str, _Tried | UserCodeError], refusals: list[Any], base: _Tried
) -> list[AdvisedTechnique]:
    """Those that apply, the largest saving first; then those refused, with why."""
    rows = [_row(t, attempts[t.key], base) for t in techniques]
    ranked = sorted((r for r in rows if r.applies), key=lambda r: -(r.saving_bytes or 0))
    ranked += [r for r in rows if not r.applies]
    return ranked + [
        AdvisedTechnique(name=r.name, key=r.key, applies=False, reason=r.reason) for r in refusals
    ]


def _check_verify(verify: bool, device: str, world_size: int | None) -> None:
    import torch

    if world_size is not None and (
        isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 2
    ):
        raise UsageError(
            f"{param('world_size')} is the number of GPUs to shard over: 2 or more, got {world_size!r}"
        )
    if verify and world_size is not None:
        raise UsageError(
            f"{param('verify')} measures the plan on this one device, and a plan may shard over "
            f"{world_size} GPUs: give {param('verify')} or {param('world_size')}, not both"
        )
    if verify and device != "cpu" and not torch.cuda.is_available():
        raise UsageError(
            f"{param('verify')} measures the plan on this machine, which has no CUDA device: advise "
            f"with {param('device', 'cpu')} to compare like with like"
        )


def _usable(
    capacity: int | str | None,
    gpu: str | None,
    budget: int | str | None,
    reserve: int | str | None,
    device: str,
) -> tuple[int | None, str | None]:
    """The bytes a plan may need (None: no plan asked for) and the card's name."""
    if budget is not None:
        if capacity is not None or gpu is not None:
            raise UsageError(f"give {param('budget')}, {param('capacity')} or {param('gpu')}, only one")
        try:
            return _capacity_bytes(budget), None
        except UsageError as error:
            raise UsageError(error.message.replace(param("capacity"), param("budget"))) from None
    card, capacity_bytes, reserve_bytes = _device_memory(capacity, gpu, reserve, device)
    usable = capacity_bytes - reserve_bytes if capacity_bytes is not None else None
    return usable, card.name if card is not None else None


def _footprint(run: RunResult) -> int:
    return int(run.footprint_bytes if run.footprint_bytes is not None else run.peak_bytes)


def _batch_value(
    target: Target, inputs: InputsFactory | None, params: dict[str, Any], name: str | None
) -> Any:
    """The batch parameter's value: given, else the factory's default (None: it has none)."""
    if name is None:
        return None
    if name in params:
        return params[name]
    from memprof.sources.targets.target import resolve

    factory: Any = (
        inputs
        if inputs is not None
        else getattr(target.module, f"{target.attr_path.split('.')[-1]}_inputs", None)
    )
    if isinstance(factory, str):
        factory = resolve(factory).func
    try:
        parameters = inspect.signature(factory).parameters if factory is not None else {}
    except (TypeError, ValueError):
        parameters = {}
    if name not in parameters:
        raise UsageError(
            f"the inputs factory takes no parameter {name!r}; name its batch parameter with "
            f"{param('batch_param')}"
        )
    default = parameters[name].default
    return None if default is inspect.Parameter.empty else default


class _Advisor:
    """Estimates of the target with combinations of techniques applied, each made once."""

    def __init__(
        self,
        target: Target,
        factory: InputsFactory | None,
        params: dict[str, Any],
        options: EstimateOptions,
        status: StatusFn | None,
    ) -> None:
        self.target, self.factory, self.params = target, factory, params
        self.options, self.status = options, status
        self.needed = "reserved_peak_bytes" if options.device == "cuda" else "footprint_bytes"
        self.made: Inputs | None = None
        self.stateful = False
        self.memo: dict[tuple[str, ...], _Tried | UserCodeError] = {}

    def make(self, params: dict[str, Any]) -> Inputs:
        from memprof.sources.targets.target import build_inputs

        return build_inputs(self.target, self.factory, "cpu", params)

    def baseline(self) -> _Tried:
        return self.tried(())

    def discover(
        self, batch_param: str | None, batch: Any, world_size: int | None
    ) -> tuple[list[Any], list[Any]]:
        """The techniques that can be tried on the baseline's objects, and those refused."""
        from memprof.sources.fake.techniques import discover

        assert self.made is not None
        return discover(self.made, batch_param, batch, self.options.device, self.stateful, world_size)

    def attempt(self, combo: tuple[Any, ...]) -> _Tried | UserCodeError:
        """The estimate of ``combo`` applied, or how the step failed with it."""
        key = tuple(sorted(t.key for t in combo))
        if key not in self.memo:
            try:
                self.memo[key] = self._estimate(combo)
            except UserCodeError as error:
                if not combo:
                    raise
                self.memo[key] = error
        return self.memo[key]

    def tried(self, combo: tuple[Any, ...]) -> _Tried:
        found = self.attempt(combo)
        if isinstance(found, UserCodeError):
            raise found
        return found

    def _estimate(self, combo: tuple[Any, ...]) -> _Tried:
        from memprof.pipeline.assemble import run_of
        from memprof.sources.fake.run import estimate_target
        from memprof.sources.fake.techniques import FlopCount, applied

        made, step = applied(combo, self.make, self.target.func)
        counted = FlopCount(step)

        def make(session: Any) -> Inputs:
            session.enter(counted.mode)
            inputs = made(self.params)
            if not combo:
                from memprof.sources.fake.techniques import stateful

                self.made = inputs
                self.stateful = stateful(inputs)
            return inputs

        label = " + ".join(t.key for t in combo) or "baseline"
        world_size = next((t.world_size for t in combo if t.world_size is not None), None)
        with _job(world_size):
            recording = estimate_target(
                counted,
                make,
                self.options,
                label=label,
                name=self.target.attr_path,
                module=self.target.module,
                status=self.status,
            )
        run = run_of(recording)
        calls = max([t.calls for t in combo], default=1)
        flops = counted.last * calls if counted.last is not None else None
        return _Tried(run=run, needed=_needed(run, self.needed), flops=flops)


def _job(world_size: int | None) -> Any:
    """Rank 0 of a ``world_size``-rank job on torch's fake process group, or nothing."""
    import contextlib

    if world_size is None:
        return contextlib.nullcontext()
    from memprof.sources.fake.job import FakeJob

    return FakeJob(world_size, 0)


def _row(technique: Any, tried: _Tried | UserCodeError, base: _Tried) -> AdvisedTechnique:
    if isinstance(tried, UserCodeError):
        failed = tried.message.splitlines()[0] if tried.message else "it failed"
        return AdvisedTechnique(
            name=technique.name, key=technique.key, applies=False, reason=f"the step fails with it: {failed}"
        )
    saving = base.needed - tried.needed
    extra = tried.flops - base.flops if tried.flops is not None and base.flops is not None else None
    return AdvisedTechnique(
        name=technique.name,
        key=technique.key,
        apply=technique.apply,
        footprint_bytes=_footprint(tried.run),
        needed_bytes=tried.needed,
        saving_bytes=saving,
        saving_ratio=saving / base.needed if base.needed else None,
        flops=tried.flops,
        extra_flops=float(extra) if extra is not None else None,
        cost=_with_host(technique.cost, tried.run),
    )


def _with_host(cost: str, run: RunResult) -> str:
    """The technique's cost, with the host memory its estimate put tensors in (offloading)."""
    host = run.estimate.host_peak_bytes if run.estimate is not None else None
    return f"{cost} ({format_bytes(host)} on the host at most)" if host else cost


# ---- a plan for a budget ------------------------------------------------------------------------


CAVEATS = ("autocast", "micro_batch", "placement")
"""Kinds of technique that cost more than compute (precision, throughput, more GPUs or the
CPU's time and copies to and from the host): at equal extra FLOPs, a plan without them comes
first."""


def _with_caveat(technique: Any) -> int:
    return 1 if technique.group in CAVEATS else 0


class _Planner:
    """The search for a plan: every combination of the techniques that save memory alone (at
    most one of each kind), cheapest first by the sum of their extra FLOPs alone (then fewer
    caveats, fewer techniques); each combination whose savings alone, added up, could bring
    it within the budget is estimated as a whole, until one fits. The order is fixed, so a
    smaller budget never gets a plan that needs more."""

    def __init__(
        self, advisor: _Advisor, base: _Tried, techniques: list[Any], tried: dict[str, _Tried]
    ) -> None:
        self.advisor, self.base = advisor, base
        self.useful = [t for t in techniques if t.key in tried and tried[t.key].needed < base.needed]
        self.saving = {t.key: base.needed - tried[t.key].needed for t in self.useful}
        self.extra = {t.key: max(0, (tried[t.key].flops or 0) - (base.flops or 0)) for t in self.useful}
        groups: dict[str, list[Any]] = {}
        for t in self.useful:
            groups.setdefault(t.group, []).append(t)
        self.groups = list(groups.values())

    def combos(self) -> list[tuple[Any, ...]]:
        every = [
            tuple(t for t in choice if t is not None)
            for choice in itertools.product(*[[None, *group] for group in self.groups])
        ]
        every = [c for c in every if c]
        return sorted(
            every,
            key=lambda c: (
                sum(self.extra[t.key] for t in c),
                sum(_with_caveat(t) for t in c),
                len(c),
                [t.key for t in c],
            ),
        )

    def plan(self, usable: int) -> tuple[tuple[Any, ...], _Tried, bool, int]:
        """(the combination, its estimate, whether it fits, combinations estimated)."""
        if self.base.needed <= usable:
            return (), self.base, True, 0
        estimated = 0
        for combo in self.combos():
            if self.optimistic(combo) > usable:
                continue
            if estimated >= MAX_PLAN_ESTIMATES:
                break
            found = self.advisor.attempt(combo)
            estimated += len(combo) > 1
            if isinstance(found, _Tried) and found.needed <= usable:
                return combo, found, True, estimated
        closest, best = self.closest()
        return closest, best, False, estimated

    def closest(self) -> tuple[tuple[Any, ...], _Tried]:
        """When nothing fits: the combination that needs least. Combinations are estimated in
        order of what their savings alone, added up, would leave, until that is no less than
        the least found (savings that interact save less together than alone added up), so
        that no plan for a larger budget needs less than it."""
        best: tuple[tuple[Any, ...], _Tried] = ((), self.base)
        for count, combo in enumerate(sorted(self.combos(), key=self.optimistic)):
            if self.optimistic(combo) >= best[1].needed or count >= MAX_CLOSEST_ESTIMATES:
                break
            found = self.advisor.attempt(combo)
            if isinstance(found, _Tried) and found.needed < best[1].needed:
                best = (combo, found)
        return best

    def optimistic(self, combo: tuple[Any, ...]) -> int:
        """What ``combo`` would need if its techniques' savings alone added up."""
        return self.base.needed - sum(self.saving[t.key] for t in combo)


def _plan_of(
    found: tuple[tuple[Any, ...], _Tried, bool, int],
    advisor: _Advisor,
    base: _Tried,
    usable: int,
    card: str | None,
) -> AdvicePlan:
    combo, tried, fits, estimated = found
    extra = tried.flops - base.flops if tried.flops is not None and base.flops is not None else None
    plan = AdvicePlan(
        techniques=tuple(t.name for t in combo),
        keys=tuple(t.key for t in combo),
        footprint_bytes=_footprint(tried.run),
        needed_bytes=tried.needed,
        extra_flops=float(extra) if extra is not None else None,
        budget_bytes=usable,
        fits=fits,
        estimated=estimated,
    )
    return replace(plan, answer=plan_answer(plan, advisor, base, card))


def _percent(extra: float | None, flops: int | None) -> str:
    if extra is None or not flops or extra <= 0:
        return ""
    return f", +{100 * extra / flops:.0f}% FLOPs"


def plan_answer(plan: AdvicePlan, advisor: _Advisor, base: _Tried, card: str | None) -> str:
    """``to fit 40.0 MiB: checkpoint every Block (-8.5 MiB alone, +10% FLOPs) and autocast
    bf16 (-6.4 MiB alone): 38.2 MiB together, +10% FLOPs, estimated``; when nothing fits,
    the closest and by how much it is over."""
    where = card or format_bytes(plan.budget_bytes)
    if not plan.techniques and plan.fits:
        return f"fits {where} as it is: needs {format_bytes(base.needed)}; nothing to change"
    parts = []
    for key, name in zip(plan.keys, plan.techniques, strict=True):
        alone = advisor.memo.get((key,))
        if isinstance(alone, _Tried):
            cost = _percent(_extra(alone, base), base.flops)
            alone_word = " alone" if len(plan.keys) > 1 else ""
            parts.append(f"{name} (-{format_bytes(base.needed - alone.needed)}{alone_word}{cost})")
        else:
            parts.append(name)
    listed = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    cost = _percent(plan.extra_flops, base.flops)
    needed = format_bytes(plan.needed_bytes)
    together = f"{needed} together{cost}" if len(parts) > 1 else needed
    if plan.fits:
        return f"to fit {where}: {listed}: {together}, estimated"
    over = format_bytes(plan.needed_bytes - plan.budget_bytes)
    return f"nothing here fits {where}: the closest is {listed}: {together}, {over} over"


def _extra(tried: _Tried, base: _Tried) -> float | None:
    return float(tried.flops - base.flops) if tried.flops is not None and base.flops is not None else None


# ---- verification -------------------------------------------------------------------------------


def _verified(
    plan: AdvicePlan, advisor: _Advisor, combo: tuple[Any, ...], status: StatusFn | None
) -> AdvicePlan:
    """The plan applied for real on this machine's device and measured by ``memprof run``'s
    engine: its footprint and bottom line."""
    from memprof.library.api import Variant, compare
    from memprof.outputs.answer import bottom_line
    from memprof.sources.fake.techniques import applied
    from memprof.sources.targets.target import build_inputs

    device = "cuda" if advisor.options.device == "cuda" else "cpu"

    def make(params: dict[str, Any]) -> Inputs:
        return build_inputs(advisor.target, advisor.factory, device, params)

    made, step = applied(combo, make, advisor.target.func)
    inputs = made(advisor.params)
    if status is not None:
        status(f"verifying the plan: {' + '.join(plan.keys) or 'the step as it is'} on {device}")
    report = compare(
        Variant(target=step, inputs=inputs, label="verify"),
        device=device,
        warmup=advisor.options.warmup,
        time_budget=0,
        status=status,
    )
    run = report.base
    if run.failed:
        raise UserCodeError(f"the plan's verification failed: {run.error or 'the step raised'}")
    measured = _footprint(run) if device == "cpu" else int(run.reserved_peak_bytes or run.peak_bytes)
    lines = bottom_line(run).lines if run.at_peak is not None else ()
    return replace(plan, measured_footprint_bytes=measured, measured=tuple(lines))
