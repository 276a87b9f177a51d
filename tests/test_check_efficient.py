"""The kv_cache_attention checker (lesson 10): plausible wrong answers, each named; correct
answers written other ways, each accepted."""

import math

import pytest
import torch
import torch.nn.functional as F

from course import check
from course.positional import apply_rotary


def _rotate(q, k, k_cache, rotary_base, position=None):
    if rotary_base is None:
        return q, k
    t = 0 if k_cache is None else k_cache.shape[-2]
    pos = torch.tensor([t]) if position is None else position
    return apply_rotary(q, rotary_base, pos), apply_rotary(k, rotary_base, pos)


def _attend(q, k, v, mask, scale=None, dim=-1, fill=float("-inf"), empty="zero"):
    """Attention as lesson 03 wrote it: a query whose every key is masked gets zero weights
    (empty="zero"); empty="as is" leaves what the softmax gives there (NaN for a -inf fill,
    uniform weights for a -1e9 fill)."""
    scale = math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) / scale  # (B, h, 1, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    weights = scores.softmax(dim=dim)
    if mask is not None and empty == "zero":
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ v


def _rotate_half(x, base, t):
    """Hugging Face's rotary layout: feature j paired with j + d/2 (rotate_half)."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = torch.cat([t * theta, t * theta]).to(x.dtype)  # (d,)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * angle.cos() + torch.cat([-x2, x1], dim=-1) * angle.sin()


def learner(**mistake):
    """A learner's answer, with one mistake switched on."""

    def kv_cache_attention(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        only_first = mistake.get("first_step_only") and k_cache is not None
        if rotary_base is not None and not mistake.get("no_rotation") and not only_first:
            if mistake.get("rotate_half"):
                t = 0 if k_cache is None else k_cache.shape[-2]
                q_new, k_new = (
                    _rotate_half(q_new, rotary_base, t),
                    _rotate_half(k_new, rotary_base, t),
                )
            elif mistake.get("restart"):
                q_new, k_new = apply_rotary(q_new, rotary_base), apply_rotary(k_new, rotary_base)
            else:
                t = 0 if k_cache is None else k_cache.shape[-2]
                t += mistake.get("shift", 0)
                position = torch.tensor([t])
                if mistake.get("query_only"):
                    q_new = apply_rotary(q_new, rotary_base, position)
                else:
                    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base, position)
                if mistake.get("value_too"):
                    v_new = apply_rotary(v_new, rotary_base, position)
        dim = mistake.get("cat_dim", -2)
        if k_cache is None:
            k_all, v_all = k_new, v_new
        else:
            first_k, second_k = (k_new, k_cache) if mistake.get("prepend") else (k_cache, k_new)
            first_v, second_v = (v_new, v_cache) if mistake.get("prepend") else (v_cache, v_new)
            k_all = torch.cat([first_k, second_k], dim=dim)
            v_all = torch.cat([first_v, second_v], dim=dim)
        k_att, v_att = k_all, v_all
        if mistake.get("twice"):
            k_att, v_att = torch.cat([k_all, k_new], dim=-2), torch.cat([v_all, v_new], dim=-2)
        if mistake.get("new_only"):
            k_att, v_att = k_new, v_new
        if mistake.get("swap_attention"):
            k_att, v_att = v_att, k_att
        T_k = k_att.shape[-2]
        scale = math.sqrt(T_k) if mistake.get("scale_by_length") else mistake.get("scale")
        if mistake.get("ignore_mask"):
            mask = None
        if mistake.get("invert_mask") and mask is not None:
            mask = ~mask
        if mistake.get("tril"):
            tril = torch.tril(torch.ones(1, T_k, dtype=torch.bool))  # the "causal" mask
            mask = tril if mask is None else mask & tril
        output = _attend(q_new, k_att, v_att, mask, scale, mistake.get("dim", -1),
                         fill=mistake.get("fill", float("-inf")),
                         empty=mistake.get("empty", "zero"))  # fmt: skip
        if mistake.get("old_cache"):
            return output, k_cache, v_cache
        if mistake.get("swap_cache"):
            return output, v_all, k_all
        if mistake.get("detach"):
            return output, k_all.detach(), v_all.detach()
        if mistake.get("float32"):
            return output.float(), k_all.float(), v_all.float()
        return output, k_all, v_all

    return kv_cache_attention


WRONG = {
    "cache not extended (the old cache returned)": (dict(old_cache=True), "cache is not extended"),
    "the new key appended twice": (dict(twice=True), "appended to the cache twice"),
    "tril(ones(1, T)) as a causal mask on the single query": (dict(tril=True), "causal mask was "
                                                              "applied to the single new query"),
    "positions restarting at 0 (apply_rotary without positions)": (dict(restart=True),
                                                                   "as if the sequence restarted"),
    "rotary positions off by one": (dict(shift=1), "rotated by position t + 1"),
    "concatenated along the last axis": (dict(cat_dim=-1), "dim=-2"),
    "concatenated along the head axis": (dict(cat_dim=1), "dim=-2"),
    "the new key put before the cache": (dict(prepend=True), "put before the cached ones"),
    "keys and values swapped in the cache": (dict(swap_cache=True), "swapped in the returned "
                                             "cache"),
    "keys and values swapped in the attention": (dict(swap_attention=True), "swapped in the "
                                                 "attention"),
    "softmax over the query axis": (dict(dim=-2), "softmax runs over the wrong axis"),
    "unscaled scores": (dict(scale=1.0), "not scaled"),
    "scores divided by d_k": (dict(scale=4.0), "divided by d_k"),
    "the cache ignored in the attention": (dict(new_only=True), "new key alone"),
    "the mask ignored": (dict(ignore_mask=True), "the mask is ignored"),
    "the mask inverted": (dict(invert_mask=True), "the mask is inverted"),
    "the cache returned detached": (dict(detach=True), "carries no gradient"),
    "rotary_base ignored": (dict(no_rotation=True), "not rotated by their position t"),
    "only the query rotated": (dict(query_only=True), "only the new query is rotated, not the "
                               "new key"),
    "the value rotated too": (dict(value_too=True), "the new value is rotated too"),
    "float32 returned for float64 inputs": (dict(float32=True), "keep the inputs' dtype"),
    "scores divided by sqrt of the number of keys": (dict(scale_by_length=True),
        "the square root of the number of keys"),
    "rotary_base used at the first step only": (dict(first_step_only=True),
        "rotary_base is used only at the first step"),
    "Hugging Face's rotate_half pairing": (dict(rotate_half=True), "j with j + d/2"),
    # left padding (lesson 06): a sentence with no real key yet must get lesson 03's zero
    "a -1e9 fill: a query with every key masked gets the mean of the values":
        (dict(fill=-1e9, empty="as is"), "gets the mean of the values"),
    "a -inf fill with no care for a row of masked keys: NaN":
        (dict(empty="as is"), "gets NaN"),
}  # fmt: skip


@pytest.mark.parametrize("name", WRONG)
def test_a_wrong_answer_is_named(name, verdict):
    mistake, message = WRONG[name]
    passed, printed = verdict(check.kv_cache_attention, learner(**mistake))
    assert passed is False and printed.startswith("❌ kv_cache_attention: "), printed
    assert message in printed, printed


def test_the_causal_flag_of_torch_is_named(verdict):
    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
        k = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=-2)
        v = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=-2)
        if mask is not None:  # is_causal and attn_mask can't be combined: mask the scores
            return _attend(q_new, k, v, mask), k, v
        return F.scaled_dot_product_attention(q_new, k, v, is_causal=True), k, v

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "causal mask was applied to the single new query" in printed


def test_changing_the_cache_in_place_is_named(verdict):
    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
        if k_cache is None:
            k_all, v_all = k_new, v_new
        else:  # "update the cache": the caller's tensors grow in place
            k_cache.data = torch.cat([k_cache, k_new], dim=-2)
            v_cache.data = torch.cat([v_cache, v_new], dim=-2)
            k_all, v_all = k_cache, v_cache
        return _attend(q_new, k_all, v_all, mask), k_all, v_all

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "in place" in printed and "old cache" in printed, printed


def test_returning_none_at_the_first_step_is_named(verdict):
    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
        k = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=-2)
        v = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=-2)
        return _attend(q_new, k, v, mask), k_cache, v_cache

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "is None: the cache is not extended" in printed, printed


def test_returning_the_old_cache_after_the_first_step_is_named(verdict):
    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
        if k_cache is None:
            return _attend(q_new, k_new, v_new, mask), k_new, v_new
        k, v = torch.cat([k_cache, k_new], dim=-2), torch.cat([v_cache, v_new], dim=-2)
        return _attend(q_new, k, v, mask), k_cache, v_cache

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "is the old cache: the cache is not extended" in printed


def test_forgetting_the_first_step_is_explained(verdict):
    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
        k, v = torch.cat([k_cache, k_new], dim=-2), torch.cat([v_cache, v_new], dim=-2)
        return _attend(q_new, k, v, mask), k, v

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "at the first step k_cache and v_cache are None" in printed


def test_parameters_in_another_order_are_named(verdict):
    def answer(q_new, k_new, v_new, v_cache, k_cache, mask=None, rotary_base=None):
        return learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "the lesson's signature" in printed, printed


# --------------------------------------------------------- correct alternatives --


def with_a_new_tensor(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """The cache built by writing into a fresh tensor instead of torch.cat; einsum scores."""
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    t = 0 if k_cache is None else k_cache.shape[-2]
    B, h, _, d_k = k_new.shape
    k_all = k_new.new_empty(B, h, t + 1, d_k)  # (B, h, t + 1, d_k)
    v_all = v_new.new_empty(B, h, t + 1, v_new.shape[-1])
    if t:
        k_all[:, :, :t] = k_cache
        v_all[:, :, :t] = v_cache
    k_all[:, :, t:] = k_new
    v_all[:, :, t:] = v_new
    scores = torch.einsum("bhqd,bhkd->bhqk", q_new, k_all) / d_k**0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, -torch.inf)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:  # a query with no key to attend to: zero weights, as in lesson 03
        weights = torch.where(mask.any(dim=-1, keepdim=True), weights, 0.0)
    return torch.einsum("bhqk,bhkd->bhqd", weights, v_all), k_all, v_all


def with_torch_sdpa(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """F.scaled_dot_product_attention on the cached tensors."""
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    if k_cache is not None:
        k_new = torch.cat((k_cache, k_new), dim=2)
        v_new = torch.cat((v_cache, v_new), dim=2)
    return F.scaled_dot_product_attention(q_new, k_new, v_new, attn_mask=mask), k_new, v_new


def with_the_course_attention(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """course.attention's function; rotation by hand with cos and sin of the pairs."""
    from course.attention import scaled_dot_product_attention

    if rotary_base is not None:
        t = 0 if k_cache is None else k_cache.shape[-2]
        d = q_new.shape[-1]
        theta = rotary_base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        cos, sin = torch.cos(t * theta).to(q_new.dtype), torch.sin(t * theta).to(q_new.dtype)

        def rotate(x):
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)

        q_new, k_new = rotate(q_new), rotate(k_new)
    keys = k_new if k_cache is None else torch.cat([k_cache, k_new], -2)
    values = v_new if v_cache is None else torch.cat([v_cache, v_new], -2)
    output, _ = scaled_dot_product_attention(q_new, keys, values, mask)
    return output, keys, values


@pytest.mark.parametrize("answer", [with_a_new_tensor, with_torch_sdpa, with_the_course_attention])
def test_a_correct_alternative_passes(answer, verdict):
    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is True, printed


def test_the_learner_helper_without_mistakes_passes(verdict):
    passed, printed = verdict(check.kv_cache_attention, learner())
    assert passed is True, printed


def test_an_unrotated_key_in_the_cache_is_named(verdict):
    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        q_rot, k_rot = _rotate(q_new, k_new, k_cache, rotary_base)
        k = k_rot if k_cache is None else torch.cat([k_cache, k_rot], dim=-2)
        v = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=-2)
        stored = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=-2)
        return _attend(q_rot, k, v, mask), stored, v

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "holds the new key before its rotation" in printed, printed


def test_the_key_appended_twice_to_the_returned_cache_is_named(verdict):
    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        output, k, v = learner()(q_new, k_new, v_new, k_cache, v_cache, mask, rotary_base)
        q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
        return output, torch.cat([k, k_new], dim=-2), torch.cat([v, v_new], dim=-2)

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "one too many: the new key and value are appended twice" in printed


def test_scaling_the_query_in_place_is_named(verdict):
    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        q_new /= math.sqrt(q_new.shape[-1])  # the scale, applied in the caller's tensor
        q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
        k = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=-2)
        v = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=-2)
        return _attend(q_new, k, v, mask, scale=1.0), k, v

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "changed q_new in place" in printed, printed


def test_rotating_the_whole_cache_again_is_named(verdict):
    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        k = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=-2)
        v = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=-2)
        if rotary_base is not None:  # every key by its position 0 .. t, the cached ones again
            k = apply_rotary(k, rotary_base)
            q_new = apply_rotary(q_new, rotary_base, torch.tensor([k.shape[-2] - 1]))
        return _attend(q_new, k, v, mask), k, v

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "rotated a second time" in printed, printed


def test_leaving_the_new_key_out_of_the_attention_is_named(verdict):
    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
        if k_cache is None:  # nothing cached: itself only
            return _attend(q_new, k_new, v_new, mask), k_new, v_new
        output = _attend(q_new, k_cache, v_cache, None if mask is None else mask[..., :-1])
        return output, torch.cat([k_cache, k_new], -2), torch.cat([v_cache, v_new], -2)

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "attends to the cached keys only" in printed, printed


def test_a_cache_of_rotated_values_is_named(verdict):
    """The output is right, but the returned v_cache holds the new value rotated."""

    def answer(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
        q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
        k = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=-2)
        v = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=-2)
        stored = v_new
        if rotary_base is not None:
            t = 0 if k_cache is None else k_cache.shape[-2]
            stored = apply_rotary(v_new, rotary_base, torch.tensor([t]))
        v_stored = stored if v_cache is None else torch.cat([v_cache, stored], dim=-2)
        return _attend(q_new, k, v, mask), k, v_stored

    passed, printed = verdict(check.kv_cache_attention, answer)
    assert passed is False and "the new value is rotated too" in printed, printed


def squeezes_the_query(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    """q_new.squeeze() "to drop the one query axis": with B = 1 the batch axis goes too."""
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    k = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=-2)
    v = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=-2)
    scores = torch.einsum("bhd,bhkd->bhk", q_new.squeeze(), k) / math.sqrt(q_new.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask[..., 0, :], float("-inf"))
    weights = scores.softmax(dim=-1).nan_to_num(0.0)
    return torch.einsum("bhk,bhkd->bhd", weights, v)[..., None, :], k, v


def test_a_squeeze_that_takes_the_batch_axis_too_is_named(verdict):
    passed, printed = verdict(check.kv_cache_attention, squeezes_the_query)
    assert passed is False
    assert printed.startswith("❌ kv_cache_attention: on inputs q_new (1, 3, 1, 2)"), printed
    assert printed.endswith(
        "Your code calls .squeeze(), which removes every axis of size 1, and here B = 1: that "
        "axis goes too. Squeeze only an axis you name (.squeeze(1)), or not at all\n"
    ), printed


def scales_by_the_cache_length(q_new, k_new, v_new, k_cache, v_cache, mask=None, rotary_base=None):
    q_new, k_new = _rotate(q_new, k_new, k_cache, rotary_base)
    k = k_new if k_cache is None else torch.cat([k_cache, k_new], dim=-2)
    v = v_new if v_cache is None else torch.cat([v_cache, v_new], dim=-2)
    length = 1 if k_cache is None else k_cache.shape[-2]  # <- the cache's length, not d_k
    return _attend(q_new, k, v, mask, scale=math.sqrt(length)), k, v


def test_scores_divided_by_the_root_of_the_cache_length_are_named(verdict):
    passed, printed = verdict(check.kv_cache_attention, scales_by_the_cache_length)
    assert passed is False
    assert "divided by the square root of the cache's length t (k_cache.shape[-2])" in printed
