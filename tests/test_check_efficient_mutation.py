"""More wrong kv_cache_attention answers, each held to its whole message (issue 7: mutation
testing of course/check/efficient.py showed words, values and branches that no test pinned
down). The learner's helper and its mistakes are tests/test_check_efficient.py's."""

import math

import pytest
import torch
from test_check_efficient import WRONG, _attend, _rotate, learner

from course import check, efficient
from course.positional import apply_rotary

CAT = (
    "torch.cat joins the cache and the new key along time, dim=-2: (B, h, t, d_k) and "
    "(B, h, 1, d_k) -> (B, h, t + 1, d_k)"
)
RESTART = (
    "with a cache of t positions, the new query and key are not rotated by their position t: "
    "they come out as they went in, as a rotation by position 0 leaves them. Either "
    "rotary_base is used only at the first step (when k_cache is None), or apply_rotary(q_new, "
    "base) turned the one new row by position 0, as if the sequence restarted at every step "
    "(both give these numbers). Rotate both by t = k_cache.shape[-2] (0 at the first step): "
    "apply_rotary(x, rotary_base, torch.tensor([t]))"
)
INPUTS = (
    "on inputs q_new (2, 2, 1, 4), k_new (2, 2, 1, 4), v_new (2, 2, 1, 4), k_cache (2, 2, 3, "
    "4), v_cache (2, 2, 3, 4), mask=None, rotary_base=None your code raised "
)
LEFT = "left padding: a padding mask over a cache of 2 that hides every key of sentence 1"
EMPTY = (
    "a query whose mask hides every key (left padding, lesson 06: a sentence with no real "
    "token yet)"
)
RULE = (
    "Lesson 03's rule: such a query gets zero weights and a zero output. Use lesson 03's "
    "scaled_dot_product_attention(q, k, v, mask), or after the softmax "
    "weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)"
)
MESSAGES = {
    "cache not extended (the old cache returned)": "the returned k_cache is None: the cache is "
    "not extended. Return the cache with the new key appended, shape (2, 2, 1, 4)",
    "the new key appended twice": "the new key and value are appended to the cache twice (once "
    "to extend it, once more for the attention), so the new position counts double in the "
    "softmax: concatenate once and attend over the result",
    "tril(ones(1, T)) as a causal mask on the single query": "a causal mask was applied to the "
    "single new query, aligned top-left (torch.tril(torch.ones(1, t + 1)), causal_mask(t + "
    "1)[:1], or F.scaled_dot_product_attention(..., is_causal=True)), so it sees position 0 "
    "only. The new query is the last position: every cached key is in its past, so it needs "
    "no causal mask at all",
    "positions restarting at 0 (apply_rotary without positions)": RESTART,
    "rotary positions off by one": "the new query and key are rotated by position t + 1; the "
    "new token's position is t, the number of positions already cached (k_cache.shape[-2]), "
    "counting from 0",
    "concatenated along the last axis": f"{INPUTS}RuntimeError: Sizes of tensors must match "
    "except in dimension 3. Expected size 3 but got size 1 for tensor number 1 in the list. "
    f"{CAT}",
    "concatenated along the head axis": f"{INPUTS}RuntimeError: Sizes of tensors must match "
    "except in dimension 1. Expected size 3 but got size 1 for tensor number 1 in the list. "
    f"{CAT}",
    "the new key put before the cache": "the new key and value are put before the cached ones: "
    "append them at the end, torch.cat([k_cache, k_new], dim=-2), so that row t of the cache "
    "is position t (the mask and the next steps read it in that order)",
    "keys and values swapped in the cache": "keys and values are swapped in the returned cache: "
    "return (output, k_cache, v_cache) in that order, keys first",
    "keys and values swapped in the attention": "keys and values are swapped in the attention: "
    "scores come from q and the keys, the output averages the values",
    "softmax over the query axis": "the softmax runs over the wrong axis (dim=-2, the single "
    "query): the weights must be a distribution over the keys, softmax(dim=-1)",
    "unscaled scores": "the scores are not scaled: divide q k^T by sqrt(d_k)",
    "scores divided by d_k": "the scores are divided by d_k; the scale is sqrt(d_k)",
    "the cache ignored in the attention": "the new query attends to the new key alone, ignoring "
    "the cache: attend over torch.cat([k_cache, k_new], dim=-2) and the values likewise",
    "the mask ignored": "the mask is ignored: pass it to the attention (True = may attend)",
    "the mask inverted": "the mask is inverted: True means may attend, so hide the keys where "
    "it is False (masked_fill(~mask, -inf))",
    "the cache returned detached": "the returned k_cache carries no gradient: something cut it "
    "from the graph (.detach(), torch.no_grad(), a copy made from values). The step is part "
    "of the computation: return the tensors torch.cat and the attention give",
    "rotary_base ignored": RESTART,
    "only the query rotated": "only the new query is rotated, not the new key: rotate both by "
    "position t, so that their dot product depends on the offset between their positions (a "
    "key keeps its rotation in the cache)",
    "the value rotated too": "the new value is rotated too: rotary positions turn the query "
    "and the key only (their dot product carries the offset); the values are averaged as they "
    "are",
    "a -1e9 fill: a query with every key masked gets the mean of the values": f"on {LEFT}, "
    f"{EMPTY} gets the mean of the values (a -1e9 fill gives every hidden key the same weight "
    f"1 / (t + 1)), so a padding token reads the padding. {RULE}",
    "a -inf fill with no care for a row of masked keys: NaN": f"on {LEFT}, {EMPTY} gets NaN: "
    "the softmax of a row of -inf is 0 / 0, and that NaN would spread to every later step. "
    f"{RULE}",
    "scores divided by sqrt of the number of keys": "the scores are divided by the square "
    "root of the number of keys (t + 1, the cache's length with the new key); the scale is "
    "sqrt(d_k), d_k = q_new.shape[-1], the width of a key, the same at every step",
    "rotary_base used at the first step only": RESTART,
    "Hugging Face's rotate_half pairing": "the rotation pairs feature j with j + d/2 (Hugging "
    "Face's rotate_half layout). Lesson 05's rotary positions pair neighbours, 2i with 2i + 1, "
    "and the cached keys were rotated that way: use apply_rotary(x, rotary_base, "
    "torch.tensor([t])), or pair x[..., 0::2] with x[..., 1::2]",
    "float32 returned for float64 inputs": "the output (a batch of one in float64, "
    "non-contiguous inputs, a cache of 5) is float32, but the inputs were float64: keep the "
    "inputs' dtype (make new tensors with x.new_zeros(...) or dtype=x.dtype; no .float() or "
    ".double())",
}


@pytest.mark.parametrize("name", WRONG)
def test_the_whole_message_of_each_usual_mistake(name, verdict):
    mistake, _ = WRONG[name]
    passed, printed = verdict(check.kv_cache_attention, learner(**mistake))
    assert passed is False
    assert printed == f"❌ kv_cache_attention: {MESSAGES[name]}\n"


def _cat(cache, new):
    return new if cache is None else torch.cat([cache, new], dim=-2)  # (B, h, t + 1, d_k)


def returns_the_old_value_cache(q_new, k_new, v_new, k_cache, v_cache, mask=None,
                                rotary_base=None):  # fmt: skip
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    k, v = _cat(k_cache, k_new), _cat(v_cache, v_new)
    return _attend(q_new, k, v, mask), k, (v if v_cache is None else v_cache)  # <-


def returns_none_for_the_value_cache(q_new, k_new, v_new, k_cache, v_cache, mask=None,
                                     rotary_base=None):  # fmt: skip
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    k, v = _cat(k_cache, k_new), _cat(v_cache, v_new)
    return _attend(q_new, k, v, mask), k, v_cache  # <- None at the first step


def appends_the_value_twice(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    k, v = _cat(k_cache, k_new), _cat(v_cache, v_new)
    return _attend(q_new, k, v, mask), k, torch.cat([v, v_new], dim=-2)  # <-


def detaches_the_output(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    output, k, v = efficient.kv_cache_attention(q_new, k_new, v_new, k_cache, v_cache, mask,
                                                rotary_base)  # fmt: skip
    return output.detach(), k, v  # <-


def detaches_the_value_cache(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    output, k, v = efficient.kv_cache_attention(q_new, k_new, v_new, k_cache, v_cache, mask,
                                                rotary_base)  # fmt: skip
    return output, k, v.detach()  # <-


def scales_by_sqrt_of_d_model(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """sqrt(h * d_k), the model's width, instead of sqrt(d_k): a divisor no mistake names."""
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    k, v = _cat(k_cache, k_new), _cat(v_cache, v_new)
    scale = math.sqrt(q_new.shape[1] * q_new.shape[-1])  # <-
    return _attend(q_new, k, v, mask, scale=scale), k, v


def rotates_with_base_100(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    if rotary_base is not None:
        rotary_base = 100.0  # <- a fixed base, not the one given
    return learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)


def scales_the_cache_in_place(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    if k_cache is not None:
        k_cache /= math.sqrt(q_new.shape[-1])  # <- the scale, applied to the caller's cache
        k = torch.cat([k_cache, k_new / math.sqrt(q_new.shape[-1])], dim=-2)
    else:
        k = k_new / math.sqrt(q_new.shape[-1])
    v = _cat(v_cache, v_new)
    return _attend(q_new, k, v, mask, scale=1.0), k * math.sqrt(q_new.shape[-1]), v


def returns_a_pair(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    output, k, v = learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)
    return output, (k, v)  # <- the caches as one item


def returns_only_the_output(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    return learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)[0]  # <-


def _with_nan_gradients(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """Right values; a NaN made in the forward pass and patched away, so the gradient that
    flows back through the output is NaN (tests/test_checkers.py's mutation)."""
    output, k, v = efficient.kv_cache_attention(q_new, k_new, v_new, k_cache, v_cache, mask,
                                                rotary_base)  # fmt: skip
    nan = output / (output - output)
    return output + torch.nan_to_num(nan, nan=0.0, posinf=0.0, neginf=0.0), k, v


MORE = [
    (returns_the_old_value_cache, "the returned v_cache is the old cache: the cache is not "
     "extended. Return torch.cat([v_cache, v_new], dim=-2), shape (2, 2, 4, 4)"),
    (returns_none_for_the_value_cache, "the returned v_cache is None: the cache is not "
     "extended. Return the cache with the new value appended, shape (2, 2, 1, 4)"),
    (appends_the_value_twice, "the returned v_cache has 2 positions, one too many: the new key "
     "and value are appended twice. Concatenate once, and return that as the new cache"),
    (detaches_the_output, "the returned output carries no gradient: something cut it from the "
     "graph (.detach(), torch.no_grad(), a copy made from values). The step is part of the "
     "computation: return the tensors torch.cat and the attention give"),
    (detaches_the_value_cache, "the returned v_cache carries no gradient: something cut it "
     "from the graph"),
    (scales_by_sqrt_of_d_model, "the output (a cache of 3 positions, B = 2, h = 2, d_k = 4, "
     "non-contiguous inputs) is not right: at index (0, 1, 0, 0) you have -0.9302, expected "
     "-1.138"),
    (rotates_with_base_100, "the output (rotary positions, rotary_base = 10000.0, a cache of 4) "
     "is not right: at index (0, 1, 0, 0) you have 0.7738, expected 0.07686"),
    (scales_the_cache_in_place, "your code changed the cache passed in (k_cache) in place. "
     "Return new tensors (torch.cat([k_cache, k_new], dim=-2)) and leave the old cache as it "
     "was: the caller may still need it (beam search keeps one per hypothesis), and autograd "
     "needs it unchanged for the backward pass"),
    (returns_a_pair, "should return 3 things (output, k_cache, v_cache), got 2"),
    (returns_only_the_output, "should return the tuple (output, k_cache, v_cache), got a "
     "tensor of shape (2, 2, 1, 4)"),
    (_with_nan_gradients, "gradients (the first step: k_cache and v_cache are None): the "
     "gradient with respect to q_new holds NaN or inf, so one training step would make the "
     "model NaN"),
]  # fmt: skip


@pytest.mark.parametrize("answer, message", MORE, ids=[m[0].__name__ for m in MORE])
def test_more_mistakes_are_named_in_full(answer, message, verdict):
    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False
    assert printed.startswith(f"❌ kv_cache_attention: {message}"), printed


def test_the_summary_counts_the_cases(verdict):
    passed, printed = verdict(check.kv_cache_attention, learner())
    assert passed is True
    assert printed == (
        "✅ kv_cache_attention: passed (7 cases: first step, float64, batch of one, "
        "non-contiguous, a padding mask, left padding hiding every key, rotary positions; 5 "
        "steps in sequence twice; outputs, caches and gradients).\n"
    )


def flattens_heads_with_view(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """B and h merged to use torch.bmm, the cache with .view: fails on a non-contiguous cache."""
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    k, v = _cat(k_cache, k_new), _cat(v_cache, v_new)
    B, h, T, d_k = k.shape
    q3 = q_new.reshape(B * h, 1, d_k)
    if k_cache is not None:
        k_cache.view(B * h, T - 1, d_k)  # <- .view needs contiguous memory
    k3, v3 = k.reshape(B * h, T, d_k), v.reshape(B * h, T, d_k)
    weights = torch.bmm(q3, k3.transpose(1, 2)).div(math.sqrt(d_k))
    if mask is not None:
        weights = weights.masked_fill(~mask.expand(B, h, 1, T).reshape(B * h, 1, T), -torch.inf)
    return torch.bmm(weights.softmax(-1), v3).reshape(B, h, 1, d_k), k, v


def masks_one_key_too_many(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """Adds a True for the new key to a mask that already covers it: t + 2 columns."""
    if mask is not None:
        mask = torch.cat([mask, torch.ones_like(mask[..., :1])], dim=-1)  # <- (B, 1, 1, t + 2)
    return learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)


def rotary_position_without_the_none_test(q_new, k_new, v_new, k_cache, v_cache, mask=None,
                                          rotary_base=None):  # fmt: skip
    """Handles the first step for the cache, but not for the rotary position."""
    if rotary_base is not None:
        t = k_cache.shape[-2]  # <- k_cache is None at the first step
        position = torch.tensor([t])
        q_new = apply_rotary(q_new, rotary_base, position)
        k_new = apply_rotary(k_new, rotary_base, position)
    k, v = _cat(k_cache, k_new), _cat(v_cache, v_new)
    return _attend(q_new, k, v, mask), k, v


CASES_NAMED = [
    (flattens_heads_with_view, "on inputs q_new (2, 2, 1, 4), k_new (2, 2, 1, 4), v_new (2, 2, "
     "1, 4), k_cache (2, 2, 3, 4), v_cache (2, 2, 3, 4), mask=None, rotary_base=None your code "
     "raised RuntimeError: view size is not compatible with input tensor's size and stride"),
    (masks_one_key_too_many, "on inputs q_new (3, 2, 1, 4), k_new (3, 2, 1, 4), v_new (3, 2, "
     "1, 4), k_cache (3, 2, 4, 4), v_cache (3, 2, 4, 4), mask (3, 1, 1, 5), rotary_base=None "
     "your code raised RuntimeError: The size of tensor a (6) must match the size of tensor b "
     "(5) at non-singleton dimension 3. the cache grows along time, dim=-2 (B, h, t, d_k) + "
     "(B, h, 1, d_k) -> (B, h, t + 1, d_k); check the axis you concatenate along"),
    (rotary_position_without_the_none_test, "on inputs q_new (2, 2, 1, 6), k_new (2, 2, 1, 6), "
     "v_new (2, 2, 1, 6), k_cache=None, v_cache=None, mask=None, rotary_base=10000.0 your code "
     "raised AttributeError: 'NoneType' object has no attribute 'shape'. at the first step "
     "k_cache and v_cache are None: then the new key and value alone are the keys and values "
     "(test `if k_cache is None:`)"),
]  # fmt: skip


@pytest.mark.parametrize("answer, message", CASES_NAMED, ids=[c[0].__name__ for c in CASES_NAMED])
def test_the_inputs_of_the_case_are_named(answer, message, verdict):
    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False
    assert printed.startswith(f"❌ kv_cache_attention: {message}"), printed


# ------------------------------------------------ the steps in sequence, on their own --
# An answer right on the six cases is, step by step, right in the sequence too (each step's
# caches are checked before they are fed back), so the whole checker never gets there with
# a wrong answer: the sequence is exercised here directly, with answers wrong at every step.


def _sequence_verdict(answer, rotary: bool) -> str:
    from course.check._framework import Mistake, generator
    from course.check.efficient import _check_sequence

    with pytest.raises(Mistake) as raised:
        _check_sequence(answer, generator(10), rotary)
    return str(raised.value)


def test_the_sequence_names_the_step_of_an_unnamed_wrong_output():
    assert _sequence_verdict(scales_by_sqrt_of_d_model, rotary=False).startswith(
        "the output (step 1 of 5 in sequence, your caches fed back) is not right: at index "
    )
    assert _sequence_verdict(rotates_with_base_100, rotary=True).startswith(
        "the output (step 1 of 5 in sequence, rotary, your caches fed back) is not right: at "
    )


def test_the_sequence_names_the_usual_mistakes():
    assert _sequence_verdict(learner(restart=True), rotary=True) == RESTART
    assert (
        _sequence_verdict(learner(new_only=True), rotary=False)
        == MESSAGES["the cache ignored in the attention"]
    )


def test_the_sequence_checks_the_returned_caches():
    assert (
        _sequence_verdict(learner(swap_cache=True), rotary=False)
        == MESSAGES["keys and values swapped in the cache"]
    )
    assert _sequence_verdict(returns_the_old_value_cache, rotary=False) == (
        "the returned v_cache is the old cache: the cache is not extended. Return "
        "torch.cat([v_cache, v_new], dim=-2), shape (2, 2, 2, 4)"
    )
    assert _sequence_verdict(appends_the_value_twice, rotary=True).startswith(
        "the returned v_cache has 2 positions, one too many"
    )


def test_the_sequence_passes_the_reference_and_leaves_its_caches_growing():
    from course.check._framework import generator
    from course.check.efficient import _check_sequence

    seen = []

    def spy(*args):
        seen.append(None if args[3] is None else tuple(args[3].shape))
        return efficient.kv_cache_attention(*args)

    for rotary in (False, True):
        _check_sequence(spy, generator(10), rotary)
    assert seen == [None, (2, 2, 1, 4), (2, 2, 2, 4), (2, 2, 3, 4), (2, 2, 4, 4)] * 2


def appends_the_values_into_the_callers_cache(q_new, k_new, v_new, k_cache, v_cache, mask=None,
                                              rotary_base=None):  # fmt: skip
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    k = _cat(k_cache, k_new)
    if v_cache is None:
        v = v_new
    else:  # "grow the cache": the caller's value tensor changes
        v_cache.data = torch.cat([v_cache, v_new], dim=-2)  # <-
        v = v_cache
    return _attend(q_new, k, v, mask), k, v


def keeps_the_cache_as_a_list(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    output, k, v = learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)
    return output, list(k.unbind(dim=-2)), list(v.unbind(dim=-2))  # <- one tensor per position


def stores_the_cache_newest_first(q_new, k_new, v_new, k_cache, v_cache, mask=None,
                                  rotary_base=None):  # fmt: skip
    """Attends in the right order, but stores the new position first."""
    output, k, v = learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)
    if k_cache is None:
        return output, k, v
    return output, k.roll(1, dims=-2), v.roll(1, dims=-2)  # <- [new, cached ...]


def stores_the_cache_rotated_again(q_new, k_new, v_new, k_cache, v_cache, mask=None,
                                   rotary_base=None):  # fmt: skip
    """Attends right, but stores cat(cache, unrotated new key) rotated as a whole, 0 .. t."""
    output, k, v = learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)
    if rotary_base is None:
        return output, k, v
    return output, apply_rotary(_cat(k_cache, k_new), rotary_base), v  # <-


def stores_the_key_rotated_by_the_new_length(q_new, k_new, v_new, k_cache, v_cache, mask=None,
                                             rotary_base=None):  # fmt: skip
    """Attends right, but stores the new key rotated by k_all.shape[-2] = t + 1."""
    output, k, v = learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)
    if rotary_base is None:
        return output, k, v
    stored = apply_rotary(k_new, rotary_base, torch.tensor([k.shape[-2]]))  # <- t + 1
    return output, _cat(k_cache, stored), v


def a_new_buffer_in_float32(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """The cache written into torch.empty(...), float32 whatever the inputs' dtype."""
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    t = 0 if k_cache is None else k_cache.shape[-2]
    B, h, _, d_k = k_new.shape
    k = torch.cat([torch.empty(B, h, 0, d_k), k_new.float()], dim=-2) if t == 0 else torch.empty(
        B, h, t + 1, d_k)  # fmt: skip
    v = torch.empty(B, h, t + 1, d_k)  # <- float32
    if t:
        k[:, :, :t], v[:, :, :t] = k_cache, v_cache
        k[:, :, t:] = k_new
    v[:, :, t:] = v_new
    return _attend(q_new, k, v, mask), k, v


CACHES_NAMED = [
    (appends_the_values_into_the_callers_cache, "your code changed the cache passed in "
     "(v_cache) in place. Return new tensors"),
    (keeps_the_cache_as_a_list, "the returned k_cache should be a torch.Tensor, got a list"),
    (stores_the_cache_newest_first, "the new key and value are put before the cached ones: "
     "append them at the end, torch.cat([k_cache, k_new], dim=-2)"),
    (stores_the_cache_rotated_again, "the whole concatenated k was rotated by positions 0 .. t, "
     "so the cached keys, which were rotated when they were new, are rotated a second time: "
     "rotate only the new query and key, by position t"),
    (stores_the_key_rotated_by_the_new_length, "the new query and key are rotated by position "
     "t + 1; the new token's position is t"),
    (a_new_buffer_in_float32, "on inputs q_new (1, 3, 1, 2), k_new (1, 3, 1, 2), v_new (1, 3, "
     "1, 2), k_cache (1, 3, 5, 2), v_cache (1, 3, 5, 2), mask=None, rotary_base=None your code "
     "raised RuntimeError: "),
]  # fmt: skip


@pytest.mark.parametrize("answer, message", CACHES_NAMED, ids=[c[0].__name__ for c in CACHES_NAMED])
def test_what_is_wrong_with_the_returned_cache_is_named(answer, message, verdict):
    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False
    assert printed.startswith(f"❌ kv_cache_attention: {message}"), printed


@pytest.mark.parametrize("dim", [0, 1, 3])
def test_a_cache_grown_along_another_axis_is_named(dim):
    """Where torch.cat along another axis runs (a cache of one position, a new row of the
    cache's own shape), the shape says which axis was used."""
    from course.check._framework import Mistake, generator
    from course.check.efficient import _expect_cache, _inputs

    args = _inputs(generator(0), B=2, h=2, t=1, d_k=4)
    _, k_new, _, k_cache, *_ = args
    want = efficient.kv_cache_attention(*args)[1]  # (2, 2, 2, 4)
    got = torch.cat([k_cache, k_new], dim=dim)
    with pytest.raises(Mistake) as raised:
        _expect_cache(got, want, k_cache, "k_cache", args, 1)
    assert str(raised.value) == (
        f"the returned k_cache has shape {tuple(got.shape)}: concatenated along dim {dim}. The "
        "cache grows along time, dim=-2: (B, h, t, d_k) + (B, h, 1, d_k) -> (2, 2, 2, 4)"
    )


def test_a_cache_grown_along_the_batch_by_a_whole_row_is_named():
    """A cache of 3 positions with one more batch row, (B + 1, h, t, d_k): the shape
    torch.cat along dim 0 gives, though no (B, h, 1, d_k) tensor could make it."""
    from course.check._framework import Mistake, generator
    from course.check.efficient import _expect_cache, _inputs

    args = _inputs(generator(0), B=2, h=2, t=3, d_k=4)
    k_cache = args[3]
    want = efficient.kv_cache_attention(*args)[1]  # (2, 2, 4, 4)
    with pytest.raises(Mistake) as raised:
        _expect_cache(torch.cat([k_cache, k_cache[:1]]), want, k_cache, "v_cache", args, 2)
    assert str(raised.value).startswith(
        "the returned v_cache has shape (3, 2, 3, 4): concatenated along dim 0. "
    )


def noisy(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """Random noise on the output, drawn from torch's global generator."""
    output, k, v = learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)
    return output + 0.1 * torch.randn_like(output), k, v  # <-


def test_the_verdict_does_not_depend_on_the_notebooks_random_state(verdict):
    torch.manual_seed(1)
    _, first = verdict(check.kv_cache_attention, noisy)
    torch.manual_seed(2)
    _, second = verdict(check.kv_cache_attention, noisy)
    assert first == second and "is not right: at index" in first, (first, second)


def test_the_mask_before_the_caches_is_named(verdict):
    """All seven parameters, the mask among the caches: the order is named (the call would
    otherwise pass k_cache as the mask and the first step would look unhandled)."""

    def answer(q_new, k_new, v_new, mask, k_cache, v_cache, rotary_base=None):
        return learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False
    assert printed == (
        "❌ kv_cache_attention: your parameters come in the order (q_new, k_new, v_new, mask, "
        "k_cache, v_cache, rotary_base); the lesson's signature is kv_cache_attention(q_new, "
        "k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None), and the notebooks pass "
        "the arguments in that order\n"
    )


def test_an_answer_without_rotary_base_is_still_held_to_the_order_of_the_caches(verdict):
    def answer(q_new, k_new, v_new, v_cache, k_cache, mask=None):
        return learner()(q_new, k_new, v_new, k_cache, v_cache, mask)

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False
    assert printed.startswith(
        "❌ kv_cache_attention: your parameters come in the order (q_new, k_new, v_new, "
        "v_cache, k_cache, mask); the lesson's signature is"
    ), printed


def test_an_answer_without_the_optional_parameters_is_held_to_the_order_of_the_caches(verdict):
    def answer(q_new, k_new, v_new, v_cache, k_cache):
        return learner()(q_new, k_new, v_new, k_cache, v_cache)

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False
    assert printed.startswith(
        "❌ kv_cache_attention: your parameters come in the order (q_new, k_new, v_new, "
        "v_cache, k_cache); the lesson's signature is"
    ), printed


def clamps_the_query_in_place(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """Clamps q_new in place "for stability": no value changes, but autograd refuses it."""
    q_new.clamp_(-1e4, 1e4)  # <- in place on the caller's tensor
    return learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)


def test_an_in_place_edit_that_changes_no_value_is_named_by_autograd(verdict):
    passed, printed = verdict(check.kv_cache_attention, clamps_the_query_in_place)
    assert passed is False
    assert printed == (
        "❌ kv_cache_attention: on inputs q_new (2, 2, 1, 4), k_new (2, 2, 1, 4), v_new (2, 2, "
        "1, 4), k_cache=None, v_cache=None, mask=None, rotary_base=None your code raised "
        "RuntimeError: a leaf Variable that requires grad is being used in an in-place "
        "operation. an in-place operation (x /= ..., x[...] = ...) wrote into one of your "
        "inputs: compute a new tensor instead (x = x / 2, not x /= 2)\n"
    )


def combines_the_mask_with_a_causal_one(q_new, k_new, v_new, k_cache, v_cache, mask=None,
                                        rotary_base=None):  # fmt: skip
    """Makes a given padding mask "causal" too, aligned top-left, as a decoder's mask is."""
    if mask is not None:
        T = mask.shape[-1]
        mask = mask & torch.ones(1, T, dtype=torch.bool).tril()  # <- (1, T): key 0 only
    return learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)


def test_a_causal_mask_combined_with_the_padding_mask_is_named(verdict):
    passed, printed = verdict(check.kv_cache_attention, combines_the_mask_with_a_causal_one)
    assert passed is False
    assert printed == (
        "❌ kv_cache_attention: "
        + MESSAGES["tril(ones(1, T)) as a causal mask on the single query"]
        + "\n"
    )


def test_the_sequence_names_rotary_positions_off_by_one_from_the_first_step():
    assert (
        _sequence_verdict(learner(shift=1), rotary=True) == MESSAGES["rotary positions off by one"]
    )


def attends_with_the_new_key_first(q_new, k_new, v_new, k_cache, v_cache, mask=None,
                                   rotary_base=None):  # fmt: skip
    """Returns the cache in the right order but attends over [new, cached ...]: the same
    without a mask (attention does not care about the keys' order), not with one."""
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    k, v = _cat(k_cache, k_new), _cat(v_cache, v_new)
    first_k, first_v = k.roll(1, dims=-2), v.roll(1, dims=-2)  # <- the new position first
    return _attend(q_new, first_k, first_v, mask), k, v


def merges_b_and_h_with_view(q_new, k_new, v_new, k_cache, v_cache,
                                                  mask=None, rotary_base=None):  # fmt: skip
    B, h, _, d_k = q_new.shape
    q_new = q_new.view(B * h, 1, d_k).view(B, h, 1, d_k)  # <- .view needs contiguous memory
    return learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)


def test_the_new_key_first_under_a_padding_mask_is_named(verdict):
    passed, printed = verdict(check.kv_cache_attention, attends_with_the_new_key_first)
    assert passed is False
    assert printed == f"❌ kv_cache_attention: {MESSAGES['the new key put before the cache']}\n"


def test_the_first_step_is_contiguous_and_the_cache_of_3_is_not(verdict):
    passed, printed = verdict(check.kv_cache_attention, merges_b_and_h_with_view)
    assert passed is False
    assert printed.startswith(f"❌ kv_cache_attention: {INPUTS}RuntimeError: view size"), printed


@pytest.mark.parametrize("t, shape", [(3, (2, 8, 4)), (0, (2, 2, 4))])
def test_a_cache_of_a_shape_no_axis_explains_is_reported_as_it_is(t, shape):
    """(B * h, t + 1, d_k) from a torch.bmm answer, or the first step's key without its time
    axis: no torch.cat along another axis gives these, so the shapes are just compared."""
    from course.check._framework import Mistake, generator
    from course.check.efficient import _expect_cache, _inputs

    args = _inputs(generator(0), B=2, h=2, t=t, d_k=4)
    want = efficient.kv_cache_attention(*args)[1]
    with pytest.raises(Mistake) as raised:
        _expect_cache(torch.zeros(shape), want, args[3], "k_cache", args, 1)
    assert str(raised.value) == (
        f"the returned k_cache has shape {shape}, expected {tuple(want.shape)}"
    )


def prepends_only_the_values(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """Attends right and returns the keys right, but the values' cache newest-first."""
    output, k, v = learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)
    return output, k, (v if v_cache is None else torch.cat([v_new, v_cache], dim=-2))  # <-


def test_a_value_cache_in_the_wrong_order_is_named(verdict):
    passed, printed = verdict(check.kv_cache_attention, prepends_only_the_values)
    assert passed is False
    assert printed == f"❌ kv_cache_attention: {MESSAGES['the new key put before the cache']}\n"


def test_the_sequence_checks_each_returned_cache_on_its_own():
    assert (
        _sequence_verdict(prepends_only_the_values, rotary=False)
        == MESSAGES["the new key put before the cache"]
    )
    assert _sequence_verdict(stores_the_cache_rotated_again, rotary=True).startswith(
        "the whole concatenated k was rotated by positions 0 .. t"
    )
    assert (
        _sequence_verdict(learner(old_cache=True), rotary=False)
        == MESSAGES["cache not extended (the old cache returned)"]
    )
    assert _sequence_verdict(returns_only_the_output, rotary=False) == (
        "should return the tuple (output, k_cache, v_cache), got a tensor of shape (2, 2, 1, 4)"
    )
