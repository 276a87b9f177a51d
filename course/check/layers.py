"""Checkers for lesson 07 (Add & Norm, feed-forward): LayerNorm, EncoderLayer.

Both exercises are classes; the checker builds them itself, positionally as the lesson
states (`LayerNorm(d_model, eps)`, `EncoderLayer(d_model, n_heads, d_ff, dropout,
norm_first)`), finds the learner's parameters by the course's names (`weight`, `bias`;
`self_attn.w_q` ..., `ff.linear1`, `ff.linear2`, `norm1`, `norm2`) and copies random
values into them, gains and shifts included, so that an answer ignoring one shows.

LayerNorm: inputs where B, T and d_model all differ (normalising over a wrong axis
gives other numbers), a batch of one, a 2-D input, float64 with a non-contiguous input,
and inputs whose variance is small next to eps (eps ignored, hard-coded or outside the
square root gives other numbers). The usual mistakes are computed and named; an eps
other than the one asked is measured from the answer and named.

EncoderLayer: both norm_first settings, without a mask, with a padding mask (in a
batch where it changes the real tokens' outputs), with padding & causal masks, and a
batch of one in float64, non-contiguous; values and gradients of x and of every
parameter. The usual mistakes are computed from the reference's own sublayers: a
residual missing, the norms in the other arrangement or another wrong place, the mask
dropped or inverted, the feed-forward without or with an extra ReLU. Dropout is
checked where it belongs: none in eval mode; in training mode on each sublayer's output
before it is added (measured exactly, with the sublayers replaced by known tensors),
inside the feed-forward and on the attention weights, at the rate asked, new each call.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from course import layers as reference
from course.check._framework import (
    Mistake,
    NotImplementedYet,
    call,
    close,
    exercise,
    expect_close,
    expect_dropout,
    expect_fresh_randomness,
    expect_gradients,
    expect_shape,
    expect_signature,
    expect_tensor,
    generator,
    noncontiguous,
    randn,
)

__all__ = ["LayerNorm", "EncoderLayer"]


def _a_class(candidate, name: str, init: tuple[str, ...], shown: str, forward: tuple, fshown: str):
    if isinstance(candidate, nn.Module):
        raise Mistake(
            f"pass the class itself, not an instance: check.{name}({name}) "
            "(the checker builds its own modules)"
        )
    if inspect.isclass(candidate) and issubclass(candidate, nn.Module):
        expect_signature(candidate.__init__, init, shown)
        expect_signature(candidate.forward, forward, fshown)


def _built(module, name: str, shown: str) -> nn.Module:
    if not isinstance(module, nn.Module):
        raise Mistake(
            f"{shown} gave a {type(module).__name__}, not an nn.Module: write "
            f"`class {name}(nn.Module)` and call super().__init__() first in __init__"
        )
    return module


def _one_tensor(out, what: str) -> torch.Tensor:
    if isinstance(out, tuple | list):
        raise Mistake(
            f"forward returned a {type(out).__name__} of {len(out)} things on {what}: "
            "return only the output tensor"
        )
    return expect_tensor(out, what if what.startswith("the output") else f"the output on {what}")


def _describe_case(x: torch.Tensor) -> str:
    extra = "" if x.dtype == torch.float32 else ", float64"
    return f"x of shape {tuple(x.shape)}{extra}" + ("" if x.is_contiguous() else ", non-contiguous")


# --------------------------------------------------------------- LayerNorm ----------


def _init_hints(candidate, signature: str):
    """Hints for a TypeError from building the learner's class: about its signature when
    the error names the learner's own __init__, about the call inside it when it names
    another (MultiHeadAttention(..., batch_first=True), nn.LayerNorm(d, epsilon=...))."""
    own = f"{getattr(candidate, '__qualname__', '')}.__init__()"

    def hint(error: str) -> str | None:
        if "positional argument" not in error and "unexpected keyword" not in error:
            return None
        if own in error or ".__init__()" not in error:
            order = ", in that order" if "positional argument" in error else ""
            return f"The constructor's signature is {signature}{order}"
        callee = error.split(".__init__()")[0].split()[-1]
        return (
            f"Your constructor's own signature is right; the error is in a call inside it: "
            f"{callee}(...) does not take those arguments. Check the signature of {callee}"
        )

    return hint


_LN_SIGNATURE = "__init__(self, d_model, eps=1e-5)"

_LN_CALL_HINTS = {
    "must match the size of tensor": "The mean and the variance lose the last axis unless you "
    "keep it: x.mean(dim=-1, keepdim=True), so that they broadcast against x (..., d_model)",
    "positional argument": "The module is called as norm(x)",
    "Dimension out of range": "Normalise over the last axis, dim=-1: x may have any number of "
    "leading axes, (..., d_model), not always three",
}

# (shape, eps given to the constructor (None: the default), input scale, what it exposes).
# B, T and d_model differ in each; a small scale makes the variance comparable to eps.
_LN_CASES = [
    ((3, 5, 8), None, 1.0, "the default eps"),
    ((4, 3, 6), 0.1, 0.2, "eps=0.1 and a small variance, so eps matters"),
    ((1, 7, 10), None, 1.0, "a batch of one"),
    ((6, 9), 1e-5, 2.0, "a 2-D input (N, d_model)"),
    ((2, 3, 16), None, 0.003, "the default eps and a tiny variance"),
    ((2, 4, 12), 1e-3, 0.05, "float64, non-contiguous"),
]
_LN_ROBUST = len(_LN_CASES) - 1


def _normalise(x, weight, bias, eps, dims=(-1,), correction=0, eps_inside=True,
               gain=True, shift=True, center=True, root=True, detach=None):  # fmt: skip
    """LayerNorm with one usual mistake switched on (see _ln_mistakes)."""
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, correction=correction)
    if detach == "mean":
        mean = mean.detach()
    elif detach == "var":
        var = var.detach()
    centred = x - mean if center else x
    if not root:
        scale = var + eps
    elif eps_inside:
        scale = torch.sqrt(var + eps)
    else:
        scale = torch.sqrt(var) + eps
    x_hat = centred / scale
    if gain:
        x_hat = x_hat * weight
    return x_hat + bias if shift else x_hat


def _ln_mistakes(x, weight, bias, eps) -> dict[str, torch.Tensor]:
    """Diagnosis -> what that mistake gives on x (only the mistakes x can tell apart)."""
    args = (x, weight, bias, eps)
    rms = x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight + bias
    wrong = {
        "you divide by d_model - 1 (the unbiased variance, the default of torch.var and "
        "x.std()): LayerNorm uses the biased variance, divided by d_model: "
        "x.var(dim=-1, unbiased=False), or ((x - mean)**2).mean(dim=-1)": _normalise(
            *args, correction=1
        ),
        "eps is added outside the square root, (x - mean) / (std + eps): it belongs inside, "
        "(x - mean) / sqrt(var + eps)": _normalise(*args, eps_inside=False),
        "eps is missing: divide by sqrt(var + eps), so that a vector with (almost) no "
        "variance does not blow up": _normalise(x, weight, bias, 0.0),
        "the gain and the shift are ignored: multiply by self.weight and add self.bias, "
        "weight * x_hat + bias (that is what lets the layer learn any scale and offset)": (
            _normalise(*args, gain=False, shift=False)
        ),
        "the shift is missing: add self.bias after multiplying by self.weight": _normalise(
            *args, shift=False
        ),
        "the gain is missing: multiply the normalised x by self.weight, then add self.bias": (
            _normalise(*args, gain=False)
        ),
        "the gain and the shift are swapped: weight multiplies, bias is added "
        "(weight * x_hat + bias)": _normalise(x, bias, weight, eps),
        "the mean is not subtracted from x: x_hat = (x - mean) / sqrt(var + eps)": _normalise(
            *args, center=False
        ),
        "you divide by the root mean square of x without subtracting the mean: that is "
        "RMSNorm, not LayerNorm. Subtract the mean first and divide by the standard "
        "deviation, sqrt(var + eps)": rms,
        "you divide by the variance; divide by its square root, the standard deviation: "
        "sqrt(var + eps)": _normalise(*args, root=False),
    }
    if eps != 1e-5:
        wrong["eps is fixed at 1e-5 whatever eps is asked: use the constructor's argument "
              "(store it, self.eps = eps)"] = _normalise(x, weight, bias, 1e-5)  # fmt: skip
    B = x.shape[0]
    axes = {"the batch axis (dim 0)": (0,)} if B > 1 else {}
    if x.dim() == 3:
        axes |= {
            "the time axis (dim 1)": (1,),
            "all of (T, d_model) together": (1, 2),
        }
        if B > 1:
            axes |= {"every axis at once": (0, 1, 2)}
        per_feature = (0, 1)  # BatchNorm: one mean per feature, over the batch and time
    else:
        per_feature = (0,)
    for name, dims in axes.items():
        wrong[f"you normalise over {name}: LayerNorm normalises each position's vector on its "
              "own, over the last axis only, mean(dim=-1, keepdim=True)"] = _normalise(
            *args, dims=dims)  # fmt: skip
    if B > 1 or x.dim() == 3:
        wrong = {
            "you normalise each feature over the batch (and time): that is BatchNorm. "
            "LayerNorm normalises each position's vector over its own d_model features: "
            "mean(dim=-1, keepdim=True)": _normalise(*args, dims=per_feature),
        } | wrong
    return wrong


def _eps_used(got, x, weight, bias, eps) -> str | None:
    """When the answer is LayerNorm with another eps, name that eps (else None)."""
    x, got = x.double(), got.double()
    weight, bias = weight.detach().double(), bias.detach().double()
    x_hat = (got - bias) / weight  # what the answer normalised to
    centred = x - x.mean(dim=-1, keepdim=True)
    # the standard deviation it divided by, fitted per row: centred = std * x_hat
    std = (centred * x_hat).sum(-1) / x_hat.pow(2).sum(-1).clamp_min(1e-300)
    if not torch.allclose(x_hat * std[..., None], centred, atol=1e-4 * float(centred.abs().max())):
        return None
    used = std.pow(2) - centred.pow(2).mean(-1)  # std^2 = var + eps_used
    middle = float(used.median())
    if abs(middle - eps) < 0.1 * eps or float((used - middle).abs().max()) > 0.05 * abs(middle):
        return None
    return (
        f"your eps is {middle:.3g}, but eps={eps:g} was asked: use the constructor's "
        "argument, inside the square root, sqrt(var + eps)"
    )


def _ln_reference(gen, d_model: int, eps: float):
    ref = reference.LayerNorm(d_model, eps)
    with torch.no_grad():
        ref.weight.copy_(1 + 0.5 * randn(gen, d_model))  # a gain away from 1 ...
        ref.bias.copy_(0.5 * randn(gen, d_model))  # ... and a shift away from 0: both count
    return ref


def _ln_parameter(module: nn.Module, name: str, d_model: int, owner: str = "your module"):
    """The learner's `weight` or `bias`: a registered nn.Parameter of shape (d_model,)."""
    role = {"weight": "gain", "bias": "shift"}[name]
    value = getattr(module, name, None)
    if value is None:
        found = ", ".join(n for n, _ in module.named_parameters()) or "none"
        raise Mistake(
            f"{owner} has no parameter `{name}` (the learned {role}): LayerNorm learns a gain "
            "and a shift, self.weight = nn.Parameter(torch.ones(d_model)) and self.bias = "
            f"nn.Parameter(torch.zeros(d_model)) (parameters found: {found})"
        )
    if not isinstance(value, nn.Parameter) or all(value is not p for p in module.parameters()):
        raise Mistake(
            f"self.{name} of {owner} is a {type(value).__name__}, not a registered "
            f"nn.Parameter: wrap it, self.{name} = nn.Parameter(...), so that the optimizer "
            "sees it and it learns (and .double() or .to(device) move it)"
        )
    if tuple(value.shape) != (d_model,):
        raise Mistake(
            f"self.{name} of {owner} has shape {tuple(value.shape)} for d_model={d_model}, "
            f"expected ({d_model},): one {role} per feature"
        )
    return value


def _check_start(weight: torch.Tensor, bias: torch.Tensor) -> None:
    if not torch.equal(weight.detach(), torch.ones_like(weight)):
        raise Mistake(
            "self.weight does not start at ones: a new LayerNorm must change nothing but the "
            "normalisation, so the gain starts at 1, nn.Parameter(torch.ones(d_model))"
        )
    if not torch.equal(bias.detach(), torch.zeros_like(bias)):
        raise Mistake(
            "self.bias does not start at zeros: the shift starts at 0, "
            "nn.Parameter(torch.zeros(d_model))"
        )


@exercise("LayerNorm")
def LayerNorm(candidate) -> str:
    # Building modules draws from torch's global generator: fork it, so that checking
    # leaves the notebook's random state as it was.
    with torch.random.fork_rng(devices=[]):
        return _check_layer_norm(candidate)


def _check_layer_norm(candidate) -> str:
    _a_class(
        candidate,
        "LayerNorm",
        ("d_model", "eps"),
        "LayerNorm(d_model, eps=1e-5)",
        ("x",),
        "forward(x)",
    )
    gen = generator(7)
    hints = _init_hints(candidate, _LN_SIGNATURE)
    for i, (shape, eps, scale, exposes) in enumerate(_LN_CASES):
        d_model = shape[-1]
        args = (d_model,) if eps is None else (d_model, eps)
        shown = f"LayerNorm({', '.join(map(str, args))})"
        module = _built(
            call(candidate, *args, names=("d_model", "eps"), hints=hints),
            "LayerNorm",
            shown,
        )
        eps = 1e-5 if eps is None else eps
        weight = _ln_parameter(module, "weight", d_model)
        bias = _ln_parameter(module, "bias", d_model)
        _check_start(weight, bias)
        ref = _ln_reference(gen, d_model, eps)
        with torch.no_grad():
            weight.copy_(ref.weight)
            bias.copy_(ref.bias)
        x = (randn(gen, *shape) + randn(gen, *shape[:-1], 1)) * scale  # each row its own mean
        if i == _LN_ROBUST:
            module.double(), ref.double()
            x = noncontiguous(x.double())
        what = f"the output of {shown} on {_describe_case(x)}"
        if i != _LN_ROBUST:  # the robust case's description is its exposes already
            what += f" ({exposes})"
        with torch.no_grad():
            want = ref(x)
            got = call(module, x, names=("x",), hints=_LN_CALL_HINTS)
            got = expect_tensor(_one_tensor(got, what), what)
            expect_shape(got, want.shape, what, "LayerNorm keeps the shape of x")
            expect_close(
                got,
                want,
                what,
                wrong=functools.partial(_ln_mistakes, x, ref.weight, ref.bias, eps),
                explain=lambda got, x=x, ref=ref, eps=eps: _eps_used(
                    got, x, ref.weight, ref.bias, eps
                ),
            )
        expect_gradients(
            lambda x, module=module: call(module, x, names=("x",)),
            ref,
            {"x": x},
            what,
            parameters={"weight": (weight, ref.weight), "bias": (bias, ref.bias)},
            wrong=_ln_gradient_mistakes(ref),
        )
    return (
        f"{len(_LN_CASES)} inputs: 2-D and 3-D, a batch of one, float64 and non-contiguous, "
        "variances small next to eps; values and gradients of x, weight and bias"
    )


def _ln_gradient_mistakes(ref) -> dict:
    def with_detached(which):
        return lambda x: _normalise(x, ref.weight, ref.bias, ref.eps, detach=which)

    return {
        "the values are right, but the mean is detached (.detach(), .data or .item()), so "
        "no gradient flows through it; the mean depends on x and must stay in the graph": (
            with_detached("mean")
        ),
        "the values are right, but the variance is detached (.detach(), .data or .item()), "
        "so no gradient flows through it; it depends on x and must stay in the graph": (
            with_detached("var")
        ),
    }


# ------------------------------------------------------------ EncoderLayer ----------

_PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")
_D_MODEL, _N_HEADS, _D_FF, _B, _T = 12, 3, 20, 2, 5  # every size differs

# EncoderLayer's and DecoderLayer's
_LAYER_SIGNATURE = "__init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False)"

_ENC_CALL_HINTS = {
    "positional argument": "The layer is called as layer(x, mask=None): self-attention takes "
    "x as query, key and value, self.self_attn(x, x, x, mask)",
    "must match the size": "Check the shapes: x is (B, T, d_model); the mask arrives "
    "broadcastable to (B, h, T, T): pass it on to self.self_attn unchanged",
}


def _random_reference(layer: type[nn.Module], gen, norm_first: bool, dropout: float):
    """The reference EncoderLayer or DecoderLayer in eval mode, with random weights."""
    ref = layer(_D_MODEL, _N_HEADS, _D_FF, dropout, norm_first).eval()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            start = 1.0 if name.startswith("norm") and name.endswith("weight") else 0.0
            p.copy_(start + 0.3 * randn(gen, *p.shape))  # gains away from 1, shifts from 0
    return ref


def _linear(module, name: str, shape: tuple[int, int], owner: str) -> nn.Linear:
    linear = getattr(module, name, None)
    if not isinstance(linear, nn.Linear):
        raise Mistake(
            f"{owner}.{name} is {'missing' if linear is None else type(linear).__name__}: "
            f"expected an nn.Linear({shape[1]}, {shape[0]})"
        )
    if tuple(linear.weight.shape) != shape or linear.bias is None:
        raise Mistake(
            f"{owner}.{name} maps {linear.in_features} -> {linear.out_features} features"
            f"{'' if linear.bias is not None else ' without a bias'}; expected "
            f"nn.Linear({shape[1]}, {shape[0]}) with a bias"
        )
    return linear


def _ff_linears(ff: nn.Module) -> tuple[nn.Linear, nn.Linear]:
    """ff.linear1, ff.linear2; or, in an nn.Sequential, its d_model -> d_ff and d_ff -> d_model."""
    up = (_D_FF, _D_MODEL)
    down = (_D_MODEL, _D_FF)
    if hasattr(ff, "linear1") or hasattr(ff, "linear2"):
        return _linear(ff, "linear1", up, "self.ff"), _linear(ff, "linear2", down, "self.ff")
    linears = [m for m in ff.modules() if isinstance(m, nn.Linear)]
    ups = [m for m in linears if tuple(m.weight.shape) == up and m.bias is not None]
    downs = [m for m in linears if tuple(m.weight.shape) == down and m.bias is not None]
    if len(ups) != 1 or len(downs) != 1:
        found = ", ".join(f"Linear({m.in_features}, {m.out_features})" for m in linears)
        raise Mistake(
            f"self.ff should hold two linear layers, linear1 = nn.Linear(d_model, d_ff) and "
            f"linear2 = nn.Linear(d_ff, d_model) (d_model={_D_MODEL}, d_ff={_D_FF}); found: "
            f"{found or 'none'}. Use FeedForward(d_model, d_ff, dropout)"
        )
    return ups[0], downs[0]


def _submodule(module: nn.Module, name: str, what: str) -> nn.Module:
    sub = getattr(module, name, None)
    if not isinstance(sub, nn.Module):
        raise Mistake(
            f"your layer has no submodule `{name}`: {what}. The names matter: the checker "
            "copies its weights into them, and lesson 08 reuses them"
        )
    return sub


def _pairs(module: nn.Module, ref) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """'self_attn.w_q.weight' -> (the learner's tensor, the reference's), for every parameter."""
    attn = _submodule(
        module, "self_attn", "self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)"
    )
    if isinstance(attn, nn.MultiheadAttention):
        raise Mistake(
            "self.self_attn is torch's nn.MultiheadAttention: use the course's "
            "MultiHeadAttention(d_model, n_heads, dropout) from lesson 04 (course.multihead). "
            "torch's keeps its weights in one in_proj_weight and reads masks the other way round"
        )
    pairs = _projection_pairs(attn, ref.self_attn, "self_attn")
    ff = _submodule(module, "ff", "self.ff = FeedForward(d_model, d_ff, dropout)")
    for linear, theirs in zip(_ff_linears(ff), (ref.ff.linear1, ref.ff.linear2), strict=True):
        name = "linear1" if theirs is ref.ff.linear1 else "linear2"
        pairs[f"ff.{name}.weight"] = (linear.weight, theirs.weight)
        pairs[f"ff.{name}.bias"] = (linear.bias, theirs.bias)
    norms = [_submodule(module, n, f"self.{n} = LayerNorm(d_model)") for n in ("norm1", "norm2")]
    if norms[0] is norms[1]:
        raise Mistake(
            "norm1 and norm2 are the same module: each sublayer has its own LayerNorm, with its "
            "own gain and bias: self.norm1 = LayerNorm(d_model); self.norm2 = LayerNorm(d_model)"
        )
    for name, norm in zip(("norm1", "norm2"), norms, strict=True):
        pairs |= _norm_pairs(norm, getattr(ref, name), name)
    return pairs


def _projection_pairs(attn: nn.Module, ref_attn, name: str) -> dict:
    """'{name}.w_q.weight' -> (the learner's tensor, the reference's), for the four
    projections of the learner's MultiHeadAttention `attn`, self.{name}."""
    pairs = {}
    for projection in _PROJECTIONS:
        linear = _linear(attn, projection, (_D_MODEL, _D_MODEL), f"self.{name}")
        theirs = getattr(ref_attn, projection)
        pairs[f"{name}.{projection}.weight"] = (linear.weight, theirs.weight)
        pairs[f"{name}.{projection}.bias"] = (linear.bias, theirs.bias)
    return pairs


def _norm_pairs(norm: nn.Module, ref_norm, name: str) -> dict:
    """'{name}.weight', '{name}.bias' -> (the learner's tensor, the reference's)."""
    return {
        f"{name}.{kind}": (
            _ln_parameter(norm, kind, _D_MODEL, f"self.{name}"),
            getattr(ref_norm, kind),
        )
        for kind in ("weight", "bias")
    }


def _copy(pairs: dict) -> None:
    with torch.no_grad():
        for mine, theirs in pairs.values():
            mine.copy_(theirs)


def _run(module, x, mask, what: str) -> torch.Tensor:
    args = (x,) if mask is None else (x, mask)
    names = ("x", "mask")
    return _one_tensor(call(module, *args, names=names, hints=_ENC_CALL_HINTS), what)


def _ff_variant(ref, x, activation: str = "relu") -> torch.Tensor:
    hidden = ref.ff.linear1(x)  # (B, T, d_ff)
    if activation in ("relu", "relu twice"):
        hidden = F.relu(hidden)
    elif activation == "gelu":
        hidden = F.gelu(hidden)
    out = ref.ff.linear2(hidden)  # (B, T, d_model)
    return F.relu(out) if activation == "relu twice" else out


def _enc_variant(ref, x, mask, arrangement: str, *, residual=(True, True), norms=("norm1", "norm2"),
                 mask_mode="as is", activation="relu", attn_source="normed",
                 ff_source="h", final_norm=None) -> torch.Tensor:  # fmt: skip
    """The reference layer (eval mode) with one usual mistake switched on.

    arrangement: "post" norm(x + sub(x)), "pre" x + sub(norm(x)), "pre from normed" (the
    residual adds norm(x), not x), "norm inside" x + norm(sub(x)); residual: keep the
    (attention, feed-forward) residuals; norms: which norms the two sublayers use;
    attn_source (pre-LN): "normed", "raw" (attn(x)), "raw keys" (attn(norm(x), x, x));
    ff_source (post-LN): "h" (the attention sublayer's output) or "x" (the layer's input).
    mask_mode: "as is", "dropped", "inverted", "causal" (a causal mask added to the one
    given); final_norm: None, "norm2" (norm2 once more on the output) or "plain" (a fresh
    LayerNorm, gain 1 and bias 0, on the output).
    """
    n1, n2 = (getattr(ref, name) for name in norms)
    if mask_mode == "causal":
        T = x.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (T, T)
        mask = causal if mask is None else mask & causal
    elif mask is not None and mask_mode != "as is":
        mask = None if mask_mode == "dropped" else ~mask
    if final_norm is not None:
        out = _enc_variant(
            ref,
            x,
            mask,
            arrangement,
            residual=residual,
            norms=norms,
            activation=activation,
            attn_source=attn_source,
            ff_source=ff_source,
        )
        return _finally_normed(ref, out, final_norm, "norm2")
    a_res, f_res = residual

    def attn(q, kv):
        return ref.self_attn(q, kv, kv, mask)

    def ff(h):
        return _ff_variant(ref, h, activation)

    if arrangement == "post":
        h = n1((x if a_res else 0) + attn(x, x))
        return n2((h if f_res else 0) + ff(h if ff_source == "h" else x))
    if arrangement == "norm inside":
        h = (x if a_res else 0) + n1(attn(x, x))
        return (h if f_res else 0) + n2(ff(h))
    if arrangement == "pre from normed":
        h = n1(x)
        h = (h if a_res else 0) + attn(h, h)
        g = n2(h)
        return (g if f_res else 0) + ff(g)
    q, kv = {"normed": (n1(x), n1(x)), "raw": (x, x), "raw keys": (n1(x), x)}[attn_source]
    h = (x if a_res else 0) + attn(q, kv)
    return (h if f_res else 0) + ff(n2(h))


def _finally_normed(ref, out: torch.Tensor, final_norm: str, last: str) -> torch.Tensor:
    """out normalised once more: by the layer's own `last` norm, or by a fresh one."""
    if final_norm == "plain":
        return nn.functional.layer_norm(out, out.shape[-1:], eps=getattr(ref, last).eps)
    return getattr(ref, last)(out)


CAUSAL_IN_THE_ENCODER = (
    "your encoder layer adds a causal mask: the encoder reads the whole source at once, and "
    "every word may attend to every other (the padding aside), the ones after it too. The "
    "causal mask belongs to the decoder's self-attention; here, pass the mask you are given "
    "on as it is, self.self_attn(x, x, x, mask)"
)


def final_norm_mistake(which: str, last: str, stack_norm: str) -> str:
    """The pre-LN layer normalises its output with `which` norm; `last`: what it should
    return; `stack_norm`: the Transformer's attribute holding the stack's one final norm."""
    return (
        f"your pre-LN layer normalises its output ({which}): a pre-LN layer returns the residual "
        f"stream as it is, {last}; the one final LayerNorm belongs after the last layer of "
        f"the whole stack (Transformer.{stack_norm}), not in every layer"
    )


def _enc_mistakes(ref, x, mask, norm_first: bool) -> dict[str, torch.Tensor]:
    """Diagnosis -> what that mistake gives, on these inputs."""
    right = "pre" if norm_first else "post"
    other = "post" if norm_first else "pre"
    run = functools.partial(_enc_variant, ref, x, mask, right)
    if norm_first:
        arrangement = (
            "with norm_first=True your layer computes post-LN, norm(x + sublayer(x)), the "
            "paper's arrangement: pre-LN normalises each sublayer's *input* and adds its "
            "output to x untouched, x = x + sublayer(norm(x)). Is norm_first ignored?"
        )
    else:
        arrangement = (
            "with norm_first=False your layer computes pre-LN, x + sublayer(norm(x)): the "
            "default is the paper's post-LN, Add & Norm after each sublayer, "
            "x = norm(x + sublayer(x)). Is norm_first ignored, or its meaning reversed?"
        )
    wrong = {
        arrangement: _enc_variant(ref, x, mask, other),
        "there is no residual connection at all: each sublayer's output must be added to "
        "its input, x + sublayer(...)": run(residual=(False, False)),
        "the attention sublayer has no residual connection: add its output to its input, "
        "x + dropout1(self_attn(...))": run(residual=(False, True)),
        "the feed-forward sublayer has no residual connection: add its output to its input, "
        "x + dropout2(ff(...))": run(residual=(True, False)),
        "norm1 and norm2 are swapped: norm1 belongs to the attention sublayer, norm2 to the "
        "feed-forward": run(norms=("norm2", "norm1")),
        "norm1 is used for both sublayers: the feed-forward sublayer has its own, norm2": run(
            norms=("norm1", "norm1")
        ),
        "norm2 is used for both sublayers: the attention sublayer has its own, norm1": run(
            norms=("norm2", "norm2")
        ),
        "the feed-forward has no ReLU: without it linear2(linear1(x)) is one linear map. "
        "FFN(x) = linear2(relu(linear1(x)))": run(activation="none"),
        "the feed-forward applies a ReLU after linear2 too: its output must be able to be "
        "negative. FFN(x) = linear2(relu(linear1(x)))": run(activation="relu twice"),
        "the feed-forward uses GELU; the paper's (and torch's default) activation is ReLU, "
        "FFN(x) = linear2(relu(linear1(x)))": run(activation="gelu"),
    }
    wrong[CAUSAL_IN_THE_ENCODER] = run(mask_mode="causal")
    if norm_first:
        wrong |= {
            final_norm_mistake("with norm2 again", "x + ff(norm2(x))", "encoder_norm"): run(
                final_norm="norm2"
            ),
            final_norm_mistake("with a LayerNorm of its own", "x + ff(norm2(x))", "encoder_norm"): (
                run(final_norm="plain")
            ),
            "the residual adds the normalised x: x = norm(x) replaced the residual stream. "
            "Pre-LN keeps x as it is and adds the sublayer's output to it, "
            "x = x + sublayer(norm(x)) (use another name for the normalised x)": _enc_variant(
                ref, x, mask, "pre from normed"
            ),
            "the attention reads x, not norm1(x): in pre-LN the sublayer works on the "
            "normalised x, h = norm1(x); x = x + self_attn(h, h, h, mask)": run(attn_source="raw"),
            "the attention's keys and values come from x; all three (query, key, value) come "
            "from the normalised h = norm1(x): self_attn(h, h, h, mask)": run(
                attn_source="raw keys"
            ),
        }
    else:
        wrong |= {
            "you normalise each sublayer's output before adding it, x + norm(sublayer(x)); "
            "the paper's Add & Norm normalises the sum: norm(x + sublayer(x))": _enc_variant(
                ref, x, mask, "norm inside"
            ),
            "the feed-forward reads the layer's input x instead of the attention sublayer's "
            "output: h = norm1(x + attn); out = norm2(h + ff(h))": run(ff_source="x"),
        }
    if mask is not None:
        wrong = {
            "the mask is ignored: pass it on to the attention, self.self_attn(x, x, x, mask). "
            "Without it the real tokens attend to the padding": run(mask_mode="dropped"),
            "the mask is inverted: it is True where a token may attend; pass it on as it is": (
                run(mask_mode="inverted")
            ),
        } | wrong
    return wrong


def _sublayer_culprit(module, ref, gen) -> str | None:
    """When the layer's output is wrong and no usual mistake matches: is one of its parts
    (norm1, norm2, ff, self_attn) itself wrong? Each is run alone on a random input."""
    z = randn(gen, _B, _T, _D_MODEL).to(ref.norm1.weight.dtype)
    parts = [
        ("self.norm1 does not compute LayerNorm: fix your LayerNorm first (check.LayerNorm)",
         lambda m: m.norm1(z)),
        ("self.norm2 does not compute LayerNorm: fix your LayerNorm first (check.LayerNorm)",
         lambda m: m.norm2(z)),
        ("self.ff does not compute linear2(relu(linear1(x))): build it with "
         "FeedForward(d_model, d_ff, dropout)", lambda m: m.ff(z)),
        ("self.self_attn does not compute multi-head attention: build it with "
         "MultiHeadAttention(d_model, n_heads, dropout) (lesson 04)",
         lambda m: m.self_attn(z, z, z)),
    ]  # fmt: skip
    return _first_wrong_part(module, ref, parts)


def _first_wrong_part(module, ref, parts) -> str | None:
    """parts: (diagnosis, part(layer) -> that part's output on fixed inputs). The first
    diagnosis whose part of the learner's layer disagrees with the reference's."""
    for diagnosis, part in parts:
        try:
            with torch.no_grad():
                got = part(module)
        except Exception:  # a part that cannot run alone: nothing to say about it
            continue
        if isinstance(got, torch.Tensor) and not close(got, part(ref)):
            return diagnosis
    return None


def _enc_cases(gen):
    """(name, x, mask): no mask; padding, where sentence 1's 3 real tokens would otherwise
    attend to 2 pads; padding & causal; a batch of one, float64, non-contiguous."""
    x = randn(gen, _B, _T, _D_MODEL)
    padding = (torch.arange(_T) < torch.tensor([5, 3])[:, None])[:, None, None, :]  # (B,1,1,T)
    causal = torch.ones(_T, _T, dtype=torch.bool).tril()  # (T, T)
    return [
        ("no mask", x, None),
        ("a padding mask (B, 1, 1, T)", x, padding),
        ("padding & causal masks (B, 1, T, T)", randn(gen, _B, _T, _D_MODEL), padding & causal),
        ("a batch of one, float64, non-contiguous, a padding mask",
         noncontiguous(randn(gen, 1, _T, _D_MODEL).double()), padding[1:]),
    ]  # fmt: skip


# ------------------------------- EncoderLayer and DecoderLayer: the shared checks ----------


@dataclasses.dataclass(frozen=True)
class _Layer:
    """What the EncoderLayer checker (lesson 07) and the DecoderLayer checker (lesson 08)
    differ in. The functions below that take one check either layer the same way."""

    name: str  # the class asked for: "EncoderLayer"
    inputs: tuple[str, ...]  # forward's tensors: ("x",) or ("x", "memory")
    masks: tuple[str, ...]  # forward's masks, each None by default
    parts: dict[str, str]  # each sublayer, in the order they run -> its name in a verdict
    dropout_to: str  # what gets the constructor's dropout besides the nn.Dropouts
    shape_hint: str  # said when the output has the wrong shape
    pairs: Callable  # (module, ref) -> {parameter's name: (the learner's, the reference's)}
    run: Callable  # (module, *inputs, *masks, what) -> the learner's output
    mistakes: Callable  # (ref, *inputs, *masks, norm_first) -> {diagnosis: what it gives}
    variant: Callable  # (ref, *inputs, *masks, arrangement) -> the reference, so arranged
    culprit: Callable  # (module, ref, gen) -> the diagnosis of a wrong part, or None

    @property
    def norms(self) -> tuple[str, ...]:
        return tuple(f"norm{i + 1}" for i in range(len(self.parts)))

    @property
    def no_masks(self) -> tuple[None, ...]:
        return (None,) * len(self.masks)


def _check_signatures(layer: _Layer, candidate) -> None:
    forward = ", ".join([*layer.inputs, *(f"{mask}=None" for mask in layer.masks)])
    _a_class(
        candidate,
        layer.name,
        ("d_model", "n_heads", "d_ff", "dropout", "norm_first"),
        f"{layer.name}(d_model, n_heads, d_ff, dropout=0.1, norm_first=False)",
        (*layer.inputs, *layer.masks),
        f"forward({forward})",
    )


def _build(layer: _Layer, candidate, norm_first: bool, dropout: float, gen, *, defaults=False):
    """The learner's layer and the reference, same weights. defaults=True builds it as
    Layer(d_model, n_heads, d_ff), relying on dropout=0.1 and norm_first=False."""
    args = (_D_MODEL, _N_HEADS, _D_FF) + (() if defaults else (dropout, norm_first))
    shown = f"{layer.name}({', '.join(map(str, args))})"
    names = ("d_model", "n_heads", "d_ff", "dropout", "norm_first")
    hints = _init_hints(candidate, _LAYER_SIGNATURE)
    module = _built(call(candidate, *args, names=names, hints=hints), layer.name, shown)
    ref = _random_reference(getattr(reference, layer.name), gen, norm_first, dropout)
    pairs = layer.pairs(module, ref)
    _copy(pairs)
    return module, ref, pairs, shown


def _seeded(check, candidate) -> str:
    """check(candidate) with torch's random state forked (the notebook's is left as it was)
    and seeded: dropout draws inside the checker, and its verdicts are reproducible."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        try:
            return check(candidate)
        except NotImplementedYet as stub:
            raise _named_stub(stub) from None


def _named_stub(stub: NotImplementedYet) -> NotImplementedYet:
    """A stub met inside another class (the notebook's LayerNorm, still a stub) is named
    by its class, not by its method: "your code calls LayerNorm", not "__init__"."""
    if stub.culprit not in ("__init__", "forward") or stub.__context__ is None:
        return stub
    raised = stub.__context__.__traceback__
    while raised is not None and raised.tb_next is not None:
        raised = raised.tb_next
    owner = raised.tb_frame.f_locals.get("self") if raised is not None else None
    if owner is None:
        return stub
    name = type(owner).__name__
    return NotImplementedYet(name if stub.culprit == "__init__" else f"{name}.forward")


def _expect_cases(layer: _Layer, candidate, gen, cases) -> int:
    """Both norm_first settings in eval mode, on each of cases(gen) (name, *inputs,
    *masks): the values, with the usual mistakes named, and the gradients of the inputs
    and of every parameter. Returns how many cases ran."""
    n_cases = 0
    for norm_first in (False, True):
        module, ref, pairs, shown = _build(layer, candidate, norm_first, 0.1, gen)
        module.eval()
        for name, *tensors in cases(gen):
            inputs, masks = tensors[: len(layer.inputs)], tensors[len(layer.inputs) :]
            what = f"{shown} in eval mode, {name}"
            if inputs[0].dtype == torch.float64:
                module.double(), ref.double()
            with torch.no_grad():
                want = ref(*inputs, *masks)
                got = layer.run(module, *inputs, *masks, what)
                expect_shape(got, want.shape, f"the output of {what}", layer.shape_hint)
                if n_cases == 0 and not torch.equal(got, layer.run(module, *inputs, *masks, what)):
                    raise Mistake(
                        f"{what}: two calls give different outputs, so something is dropped "
                        "in eval mode. Dropout acts only while training: use nn.Dropout "
                        "modules, or F.dropout(x, p, training=self.training)"
                    )
                expect_close(
                    got,
                    want,
                    f"the output of {what}",
                    wrong=functools.partial(layer.mistakes, ref, *inputs, *masks, norm_first),
                    explain=lambda got, module=module, ref=ref: layer.culprit(module, ref, gen),
                )
            expect_gradients(
                lambda *inputs, module=module, masks=masks, what=what: layer.run(
                    module, *inputs, *masks, what
                ),
                lambda *inputs, ref=ref, masks=masks: ref(*inputs, *masks),
                dict(zip(layer.inputs, inputs, strict=True)),
                f"the output of {what}",
                parameters=pairs,
            )
            n_cases += 1
    return n_cases


def _expect_defaults(layer: _Layer, module, ref, shown: str, *inputs) -> None:
    """Layer(d_model, n_heads, d_ff), built as `module`, is the paper's post-LN."""
    module.eval()
    with torch.no_grad():
        got, want = layer.run(module, *inputs, *layer.no_masks, shown), ref(*inputs)
        expect_shape(got, want.shape, f"the output of {shown}")
        pre = layer.variant(ref, *inputs, *layer.no_masks, "pre")
        if close(got, pre) and not close(got, want):
            raise Mistake(
                f"{shown}, built with the defaults, computes pre-LN: the default is "
                "norm_first=False, the paper's post-LN"
            )
        expect_close(got, want, f"the output of {shown} (the default dropout and norm_first)")


def _expect_dropout_while_training(layer: _Layer, candidate, gen, norm_first, p, *inputs):
    """No randomness at dropout=0.0 nor in eval mode; at dropout=p, some in training mode,
    new on each call. Returns the layer built with dropout=p: module, ref, shown."""

    def run(module, what):
        return layer.run(module, *inputs, *layer.no_masks, what)

    # training mode, dropout=0: nothing random anywhere (no fixed rate hidden inside)
    module, ref, _, shown = _build(layer, candidate, norm_first, 0.0, gen)
    with torch.no_grad():
        got = run(module.train(), f"{shown} in training mode")
        if not close(got, ref(*inputs)):
            if torch.equal(got, run(module, f"{shown} in training mode")):
                raise Mistake(  # a fixed rate would drop other entries on the next call
                    f"{shown} in training mode changes the output although dropout=0.0, and "
                    "identically on every call, so not at random: is the rate used as the "
                    "probability of keeping? nn.Dropout(1 - dropout) drops everything at "
                    "dropout=0.0; nn.Dropout(dropout) drops each value with probability dropout"
                )
            raise Mistake(
                f"{shown} in training mode changes the output although dropout=0.0: pass the "
                "constructor's dropout on to every nn.Dropout, MultiHeadAttention and "
                "FeedForward, not a fixed rate"
            )

    module, ref, _, shown = _build(layer, candidate, norm_first, p, gen)
    with torch.no_grad():
        want = ref.eval()(*inputs)
        module.eval()
        evaluated = run(module, f"{shown} in eval mode")
        again = run(module, f"{shown} in eval mode")
        if not close(evaluated, want) or not torch.equal(evaluated, again):
            raise Mistake(
                f"{shown}: the output changes in eval mode. Dropout acts only while training: "
                "use nn.Dropout modules, or F.dropout(x, p, training=self.training)"
            )
        module.train()
        first = run(module, f"{shown} in training mode")
        second = run(module, f"{shown} in training mode")
        if close(first, want):
            raise Mistake(
                f"{shown} in training mode drops nothing: the dropout argument is not used. "
                "Apply nn.Dropout(dropout) to each sublayer's output, and pass dropout on to "
                f"{layer.dropout_to}"
            )
        if torch.equal(first, second):
            raise Mistake(
                f"{shown} in training mode: two calls give the same output, so dropout draws "
                "the same mask every time. Don't seed inside forward and don't keep one mask"
            )
    return module, ref, shown


def _expect_dropped(dropped, kept_all, p: float, what: str, where: str) -> None:
    """`dropped` is `kept_all` after dropout at rate p: each entry 0 or kept / (1 - p),
    about p of them 0. Like the framework's expect_dropout, with this lesson's words."""
    dropped, kept_all = dropped.detach().double(), kept_all.detach().double()
    informative = kept_all.abs() > 1e-6
    zero = dropped.abs() <= 1e-7
    if not zero[informative].any():
        raise Mistake(f"{what}: nothing is dropped at dropout={p} in training mode. {where}")
    scaled = torch.isclose(dropped, kept_all / (1 - p), atol=1e-5, rtol=1e-4)
    if not (zero | scaled)[informative].all():
        ratio = (dropped / kept_all)[informative & ~zero]
        if float(ratio.max() - ratio.min()) < 1e-3 and abs(float(ratio[0]) - 1) < 1e-3:
            raise Mistake(
                f"{what}: the values that survive dropout are not rescaled: multiply them by "
                f"1 / (1 - p) (nn.Dropout and F.dropout do it for you)"
            )
        if float(ratio.max() - ratio.min()) < 1e-3 and float(ratio[0]) < 1:
            raise Mistake(
                f"{what}: the kept values are multiplied by {float(ratio[0]):.3g}, so they "
                f"shrink; dropout divides them by 1 - p = {1 - p:.3g}, so that the expected "
                "value stays the same: multiply by 1 / (1 - p) (nn.Dropout and F.dropout do "
                "it for you)"
            )
        if float(ratio.max() - ratio.min()) < 1e-3:
            raise Mistake(
                f"{what}: the kept values are scaled by {float(ratio[0]):.3g}, which is dropout "
                f"at p={1 - 1 / float(ratio[0]):.2g}, but dropout={p} was asked: pass the "
                "constructor's rate on, not a fixed number"
            )
        raise Mistake(
            f"{what}: with dropout={p} each entry should be either 0 or value / (1 - p). {where}"
        )
    share = float((zero & informative).sum()) / max(int(informative.sum()), 1)
    if abs(share - p) > 0.07:
        raise Mistake(
            f"{what}: with dropout={p} you dropped {share:.0%} of the values; about {p:.0%} "
            "should go. Pass the constructor's rate on, not a fixed number"
        )


def _check_ff_dropout(module, ref, gen, p, shown) -> None:
    """Inside the feed-forward: dropout on the ReLU's output, the hidden layer."""
    z = randn(gen, 4, 16, _D_MODEL)
    ff = module.ff
    with torch.no_grad():
        try:
            first, second = ff.train()(z), ff(z)
        except Exception:  # an ff that does not run alone: the layer's checks judged it
            return
        if torch.equal(first, second):
            raise Mistake(
                f"{shown}: self.ff drops nothing in training mode: build it with the rate, "
                "FeedForward(d_model, d_ff, dropout) (dropout after the ReLU)"
            )
        _, linear2 = _ff_linears(ff)
        seen = []  # what linear2 receives: the hidden layer, after dropout

        def spy(hidden):
            seen.append(hidden)
            return F.linear(hidden, linear2.weight, linear2.bias)

        linear2.forward = spy
        try:
            out = ff(z)
        finally:
            del linear2.forward
        if len(seen) != 1 or not isinstance(out, torch.Tensor):
            return  # an ff that does not call its linear2 once: the layer's checks judged it
        kept_all = F.relu(ref.ff.linear1(z))  # (4, 16, d_ff)
        if seen[0].shape == kept_all.shape:
            _expect_dropped(
                seen[0], kept_all, p, f"{shown}: self.ff's hidden layer (what linear2 receives)",
                "Dropout in the feed-forward goes after the ReLU, before linear2",
            )  # fmt: skip
        if not close(out, F.linear(seen[0], linear2.weight, linear2.bias)):
            raise Mistake(
                f"{shown}: self.ff changes linear2's output in training mode (a dropout after "
                "linear2?): inside the feed-forward, dropout goes after the ReLU only, "
                "linear2(dropout(relu(linear1(x)))); the layer drops the sublayer's output itself"
            )


def _expect_attention_dropout(module, ref, attn_name: str, z, kv, p: float, shown: str) -> None:
    """On the attention weights, inside self.{attn_name} (lesson 04's module), queries z."""
    attn = getattr(module, attn_name).train()
    with torch.no_grad():
        first, second = attn(z, kv, kv), attn(z, kv, kv)
        if torch.equal(first, second):
            raise Mistake(
                f"{shown}: self.{attn_name} drops nothing in training mode: build it with the "
                "rate, MultiHeadAttention(d_model, n_heads, dropout)"
            )
        weights = getattr(attn, "attn", None)
        if isinstance(weights, torch.Tensor):
            theirs = getattr(ref, attn_name).eval()
            theirs(z, kv, kv)
            expect_dropout(weights, theirs.attn, p, f"{shown}: self.{attn_name}.attn")


def _expect_inputs_kept(layer: _Layer, seen: dict, measured: int, inputs, what: str):
    """With the norms the identity and every sublayer before the measured one returning
    zeros, those sublayers read the layer's inputs themselves (x, and memory as keys and
    values). A tensor they were given that is an input with zeros in it, the rest scaled
    by one constant, is that input dropped: randomness in the wrong place."""
    for part in list(layer.parts)[: measured + 1]:
        for given in seen.get(part, ()):
            for name, want in zip(layer.inputs, inputs, strict=True):
                if not isinstance(given, torch.Tensor) or given.shape != want.shape:
                    continue
                kept = given != 0
                if kept.all() or not (want != 0).all():
                    continue
                ratio = given[kept] / want[kept]
                if float(ratio.max() - ratio.min()) < 1e-3:
                    raise Mistake(
                        f"{what}: dropout is applied to {name} before the {layer.parts[part]}. "
                        "Dropout belongs on each sublayer's output, before it is added to x "
                        "(and inside the attentions and the feed-forward), not on what a "
                        "sublayer reads"
                    )


def _expect_residual_dropout(layer: _Layer, candidate, gen, norm_first, p, value, *inputs):
    """On each sublayer's output, before it is added: measured exactly by replacing the
    sublayers by ones returning known tensors (`value` for the one measured) and the norms
    by the identity. Skipped when the layer does not call them as self.self_attn(...),
    self.ff(...), self.norm1(...) and so on."""
    name = "pre-LN" if norm_first else "post-LN"
    x = inputs[0]
    for i, words in enumerate(layer.parts.values()):
        module, _, _, shown = _build(layer, candidate, norm_first, p, gen)
        outs = [value if j == i else torch.zeros_like(value) for j in range(len(layer.parts))]
        seen = {}  # what each replaced sublayer was given, positionally or by keyword

        def replaced(*args, out, part, seen=seen, **kwargs):
            seen[part] = [*args, *kwargs.values()]
            return out

        for part, out in zip(layer.parts, outs, strict=True):
            getattr(module, part).forward = functools.partial(replaced, out=out, part=part)
        for norm in layer.norms:
            getattr(module, norm).forward = lambda h: h
        with torch.no_grad():
            try:
                calm = layer.run(module.eval(), *inputs, *layer.no_masks, shown)
            except Mistake:
                return
            if not close(calm, x + value):  # the layer does not call its parts: can't measure
                return
            module.train()
            what = f"{shown} ({name}) in training mode: the {words} sublayer's output"
            got = layer.run(module, *inputs, *layer.no_masks, what)
            _expect_inputs_kept(layer, seen, i, inputs, f"{shown} ({name}) in training mode")
            dropped = got - x
            if close(dropped, value):
                raise Mistake(
                    f"{what} is not dropped: apply dropout to it before adding it to x, "
                    f"x + dropout{i + 1}(sublayer(...))"
                )
            after = got.abs() <= 1e-7  # zeros in the sum x + value: x itself was dropped there
            if after.float().mean() > 0.1:  # (also with the output dropped before it too)
                raise Mistake(
                    f"{what}: dropout is applied after the residual addition, to x + sublayer: "
                    "that drops parts of x itself. Drop only the sublayer's output, then add"
                )
            _expect_dropped(dropped, value, p, what, "Drop it before adding it to x")
            again = layer.run(module, *inputs, *layer.no_masks, what) - x
            expect_fresh_randomness(dropped, again, what)


# ------------------------------------------------------------ EncoderLayer: the checker --

_ENCODER = _Layer(
    name="EncoderLayer",
    inputs=("x",),
    masks=("mask",),
    parts={"self_attn": "attention", "ff": "feed-forward"},
    dropout_to="MultiHeadAttention and FeedForward",
    shape_hint="It is (B, T, d_model)",
    pairs=_pairs,
    run=_run,
    mistakes=_enc_mistakes,
    variant=_enc_variant,
    culprit=_sublayer_culprit,
)


@exercise("EncoderLayer")
def EncoderLayer(candidate) -> str:
    return _seeded(_check_encoder_layer, candidate)


def _check_encoder_layer(candidate) -> str:
    _check_signatures(_ENCODER, candidate)
    gen = generator(8)
    n_cases = _expect_cases(_ENCODER, candidate, gen, _enc_cases)
    module, ref, _, shown = _build(_ENCODER, candidate, False, 0.1, gen, defaults=True)
    _expect_defaults(_ENCODER, module, ref, shown, randn(gen, _B, _T, _D_MODEL))
    for norm_first in (False, True):
        _check_dropout(candidate, gen, norm_first)
    return (
        f"{n_cases} cases, post-LN and pre-LN: no mask, padding, padding & causal, a batch of "
        "one in float64, non-contiguous; values and gradients of x and every parameter; the "
        "defaults; dropout only while training, on each sublayer's output, in the feed-forward "
        "and on the attention weights, at the rate asked"
    )


def _check_dropout(candidate, gen, norm_first: bool) -> None:
    p = 0.3
    x = randn(gen, 4, 16, _D_MODEL)  # 768 values per sublayer output: the rate is measurable
    module, ref, shown = _expect_dropout_while_training(_ENCODER, candidate, gen, norm_first, p, x)
    _check_ff_dropout(module, ref, gen, p, shown)
    z = randn(gen, 4, 16, _D_MODEL)
    _expect_attention_dropout(module, ref, "self_attn", z, z, p, shown)
    x, value = randn(gen, 4, 16, _D_MODEL), randn(gen, 4, 16, _D_MODEL)
    _expect_residual_dropout(_ENCODER, candidate, gen, norm_first, p, value, x)
