"""The lesson 12 checker, sample_next: it accepts every correct sampler and names each
usual mistake.

A correct answer may draw its ids in many ways (multinomial over the vocabulary or over
the sorted tokens, a loop per row, the Gumbel-max trick), so the checker judges the
distribution each call samples from, with many seeded draws and bounds that a correct
answer exceeds with probability below 1e-9. Each wrong answer below is one a learner
writes; each test asserts the checker returns False *and* prints that mistake's
diagnosis, on one verdict line.
"""

import math

import pytest
import torch

from course import check, lm
from course.check import sampling

# ------------------------------------------------------------ correct answers ----------


def sort_based(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Everything in sorted order, then the drawn position mapped back to its token."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    if top_k is not None:
        kth = sorted_probs[..., top_k - 1 : top_k]  # ties with the k-th stay
        sorted_probs = torch.where(sorted_probs >= kth, sorted_probs, 0.0)
        sorted_probs = sorted_probs / sorted_probs.sum(dim=-1, keepdim=True)
    if top_p is not None:
        above = sorted_probs.cumsum(dim=-1) - sorted_probs
        sorted_probs = torch.where(above < top_p, sorted_probs, 0.0)
    V = logits.shape[-1]
    position = torch.multinomial(sorted_probs.reshape(-1, V), 1, generator=generator)
    return order.reshape(-1, V).gather(-1, position).reshape(logits.shape[:-1])


def cumsum_with_scatter(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """A threshold for top-k; top-p's mask shifted right by one, scattered back."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = scores.softmax(dim=-1)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        remove = sorted_probs.cumsum(dim=-1) > top_p
        remove = torch.cat([torch.zeros_like(remove[..., :1]), remove[..., :-1]], dim=-1)
        probs = probs.masked_fill(torch.zeros_like(remove).scatter(-1, order, remove), 0.0)
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])


def loop_per_row(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """One row at a time, with Python lists."""
    rows = logits.reshape(-1, logits.shape[-1])
    ids = []
    for row in rows:
        if temperature == 0:
            ids.append(int(row.argmax()))
            continue
        probs = torch.softmax(row / temperature, dim=0).tolist()
        order = sorted(range(len(probs)), key=lambda i: -probs[i])
        if top_k is not None:
            order = [i for i in order if probs[i] >= probs[order[top_k - 1]]]
        if top_p is not None:
            total, mass, nucleus = sum(probs[i] for i in order), 0.0, []
            for i in order:
                nucleus.append(i)
                mass += probs[i] / total
                if mass >= top_p:
                    break
            order = nucleus
        weights = torch.zeros(len(probs), dtype=torch.float64)
        weights[order] = torch.tensor([probs[i] for i in order], dtype=torch.float64)
        ids.append(int(torch.multinomial(weights, 1, generator=generator)))
    return torch.tensor(ids, dtype=torch.long).reshape(logits.shape[:-1])


def topk_exactly_k(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """torch.topk's k tokens scattered back: exactly k kept, ties broken by topk."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        values, indices = torch.topk(scores, top_k, dim=-1)
        scores = torch.full_like(scores, float("-inf")).scatter(-1, indices, values)
    probs = torch.softmax(scores, dim=-1)
    if top_p is not None:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        keep = (sorted_probs.cumsum(-1) - sorted_probs) < top_p
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs * keep)
    if probs.dim() == 1:
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def gumbel_max(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """The Gumbel-max trick: argmax(log p + Gumbel noise) is a draw from p."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits.double() / temperature
    if top_k is not None:
        kth = scores.topk(top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, -math.inf)
    probs = scores.softmax(dim=-1)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        drop = (sorted_probs.cumsum(-1) - sorted_probs) >= top_p
        probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0.0)
    u = torch.rand(probs.shape, generator=generator, dtype=torch.float64)
    return (probs.log() - torch.log(-torch.log(u))).argmax(dim=-1)


RIGHT = [lm.sample_next, sort_based, cumsum_with_scatter, loop_per_row, topk_exactly_k, gumbel_max]


@pytest.mark.parametrize("answer", RIGHT, ids=[a.__name__ for a in RIGHT])
def test_correct_answers_pass(answer, verdict):
    passed, printed = verdict(check.sample_next, answer)
    assert passed is True and printed.startswith("✅ sample_next: passed"), printed


# ------------------------------------------------------------ wrong answers ----------


def _learner(logits, temperature, top_k, top_p, generator, mistake=None):
    """A learner's sampler, right unless `mistake` names the one thing done wrong."""
    if temperature == 0 and mistake != "no greedy branch":
        return logits.argmax(dim=-1)
    if mistake == "in place":
        logits /= temperature
        scores = logits
    elif mistake == "multiplied":
        scores = logits * temperature
    elif mistake == "after top-p":
        scores = logits.clone()
    else:
        scores = logits / temperature
    if top_k is not None and not (mistake == "elif" and top_p is not None):
        if mistake == "k over the batch":
            kth = scores.flatten().topk(top_k).values[-1]
        else:
            k = top_k - 1 if mistake == "k - 1" else top_k
            kth = scores.topk(k, dim=-1).values[..., -1:] if k > 0 else scores.max() + 1
        if mistake == "strict":  # everything above the (k+1)-th: fewer than k on ties
            cut = scores.topk(top_k + 1, dim=-1).values[..., -1:]
            scores = scores.masked_fill(scores <= cut, float("-inf"))
        else:
            scores = scores.masked_fill(scores < kth, float("-inf"))
    if mistake == "naive exp":
        exp = torch.exp(scores)
        probs = exp / exp.sum(dim=-1, keepdim=True)
    elif mistake == "softmax dim 0":
        probs = torch.softmax(scores, dim=0)
    elif mistake == "not renormalised":
        probs = torch.softmax(logits / temperature, dim=-1) * torch.isfinite(scores)
    else:
        probs = torch.softmax(scores, dim=-1)
    if top_p is not None and not (mistake == "p ignored" and top_k is not None):
        if mistake == "unsorted":
            above = probs.cumsum(dim=-1) - probs
            probs = probs.masked_fill(above >= top_p, 0.0)
        else:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            cumulative = sorted_probs.cumsum(dim=-1)
            if mistake == "boundary dropped":
                drop = cumulative > top_p
            else:
                drop = cumulative - sorted_probs >= top_p
            probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0.0)
    if mistake == "after top-p":
        probs = probs ** (1 / temperature)
    if mistake == "p before k" and top_k is not None and top_p is not None:
        probs = _p_then_k(logits / temperature, top_k, top_p)
    if mistake == "always argmax":
        return probs.argmax(dim=-1)
    if mistake == "global":
        draw = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1)
    elif mistake == "categorical":
        draw = torch.distributions.Categorical(probs=probs.reshape(-1, probs.shape[-1])).sample()
    elif mistake == "reseeded":
        own = torch.Generator().manual_seed(0)
        draw = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=own)
    else:
        draw = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator)
    if mistake == "first row":
        return draw[0, 0]
    if mistake == "keeps the sample axis" and logits.dim() == 2:
        return draw
    return draw.reshape(logits.shape[:-1])


def _p_then_k(scores, top_k, top_p):
    probs = scores.softmax(dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    drop = sorted_probs.cumsum(-1) - sorted_probs >= top_p
    probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0.0)
    kth = probs.topk(top_k, dim=-1).values[..., -1:]
    return probs.masked_fill(probs < kth, 0.0)


def _wrong(mistake: str):
    def answer(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        return _learner(logits, temperature, top_k, top_p, generator, mistake)

    answer.__name__ = mistake.replace(" ", "_").replace("-", "_")
    return answer


def stub(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    # YOUR CODE HERE
    raise NotImplementedError


def returns_a_python_int(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return int(lm.sample_next(logits[..., :], temperature, top_k, top_p, generator).flatten()[0])


def returns_float_ids(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return lm.sample_next(logits, temperature, top_k, top_p, generator).float()


def parameters_reordered(logits, top_k=None, top_p=None, temperature=1.0, generator=None):
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def squeezes_every_axis(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze()  # B = 1: shape ()


def view_instead_of_reshape(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    flat = logits.view(-1)  # fails on a non-contiguous batch
    return lm.sample_next(flat.view(logits.shape), temperature, top_k, top_p, generator)


WRONG = [
    (stub, "⏳ sample_next: not implemented yet"),
    (_wrong("multiplied"), "the logits were multiplied by the temperature"),
    (_wrong("softmax dim 0"), "the softmax was taken over the batch axis (dim=0)"),
    (_wrong("boundary dropped"), "top-p dropped the boundary token"),
    (_wrong("unsorted"), "top-p added up the probabilities in vocabulary order"),
    (_wrong("k - 1"), "top-k kept k - 1 tokens"),
    (_wrong("strict"), "dropped the tokens tied with the k-th largest"),
    (_wrong("global"), "torch's global random generator"),
    (_wrong("categorical"), "torch.distributions.Categorical"),
    (_wrong("always argmax"), "always drew the most probable token"),
    (_wrong("no greedy branch"), "temperature=0 means greedy"),
    (_wrong("not renormalised"), "top-p must be applied after top-k"),
    (_wrong("p before k"), "top-p must be applied after top-k"),
    (_wrong("first row"), "one id per row of logits"),
    (_wrong("keeps the sample axis"), "torch.multinomial(probs, 1) gives (B, 1)"),
    (_wrong("in place"), "changed one of its input tensors in place"),
    (_wrong("after top-p"), "the temperature must be applied before top-k and top-p"),
    (_wrong("naive exp"), "overflow"),
    (_wrong("reseeded"), "two calls with the same generator drew exactly the same ids"),
    (_wrong("elif"), "top_k was ignored when top_p was given too"),
    (_wrong("p ignored"), "top_p was ignored when top_k was given too"),
    (_wrong("k over the batch"), "top-k over the whole batch"),
    (returns_a_python_int, "should be a torch.Tensor of token ids"),
    (returns_float_ids, "ids should be integers (torch.long)"),
    (parameters_reordered, "the lesson's signature is sample_next(logits, temperature"),
    (view_instead_of_reshape, "use .reshape(...) instead of .view(...)"),
    (squeezes_every_axis, "the batch's too when B = 1: use .squeeze(-1) or [:, 0]"),
]


@pytest.mark.parametrize(
    "answer, diagnosis", WRONG, ids=[f"{w[0].__name__}-{i}" for i, w in enumerate(WRONG)]
)
def test_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and diagnosis in printed, printed
    if diagnosis.startswith("⏳"):
        assert printed.startswith(diagnosis), printed
    else:
        assert printed.startswith("❌ sample_next: "), printed


@pytest.mark.parametrize(
    "answer", [_wrong("global"), _wrong("categorical"), _wrong("reseeded"), lm.sample_next]
)
def test_checking_leaves_the_global_random_state_as_it_was(answer, verdict):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    verdict(check.sample_next, answer)
    assert torch.equal(torch.rand(3), expected)


# ------------------------------------------------------- the checker's own bounds ----


def test_the_tolerance_is_hoeffdings_at_a_tiny_false_alarm_rate():
    n, delta = sampling.DRAWS, sampling.FALSE_ALARM
    assert sampling.TOLERANCE == pytest.approx(math.sqrt(math.log(2 / delta) / (2 * n)))
    assert delta <= 1e-12 and sampling.TOLERANCE < 0.07


def test_every_case_separates_each_mistake_from_the_right_distribution():
    """A mistake the checker names must be told apart from the right answer by more than
    twice the tolerance on some token, or by a token the right answer never draws that the
    mistake draws often (or the reverse), so that neither can pass for the other."""
    for case in sampling.CASES + sampling.BOTH:
        want = case.distribution()
        for diagnosis, (_, alt) in case.mistakes().items():
            gap = (alt - want).abs().amax(dim=-1)  # (R,)
            support = ((alt > 0) != (want > 0)) & ((alt >= sampling.MUST) | (want >= sampling.MUST))
            assert bool((gap > 2 * sampling.TOLERANCE).any() or support.any()), (
                case.name,
                diagnosis,
            )


def test_every_token_a_case_must_draw_is_drawn_with_near_certainty():
    # (1 - MUST) ** DRAWS: the chance that a token of probability MUST is never drawn
    assert (1 - sampling.MUST) ** sampling.DRAWS < 1e-40


def test_a_correct_answer_fails_a_check_with_probability_below_one_in_a_billion():
    token_tests = sum(len(case.rows) * len(case.rows[0]) for case in sampling.CASES + sampling.BOTH)
    assert token_tests <= 110  # as the checker's docstring says
    assert token_tests * sampling.FALSE_ALARM + token_tests * (1 - sampling.MUST) ** 4000 < 1e-9


# ------------------------------------------- issue 32: wrong answers that passed ----------
# Each written as a learner writes it; each was accepted, or named as another mistake,
# before the checker learnt it.


def _filtered(scores, top_k, top_p):
    """Right top-k (on scores) and top-p: the probabilities."""
    if top_k is not None:
        kth = scores.topk(top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = scores.softmax(dim=-1)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        drop = sorted_probs.cumsum(-1) - sorted_probs >= top_p
        probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0.0)
    return probs


def _draw(probs, logits, generator):
    ids = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator)
    return ids.reshape(logits.shape[:-1])


def fixed_seed_without_a_generator(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if generator is None:
        generator = torch.Generator().manual_seed(0)  # "reproducible by default"
    if temperature == 0:
        return logits.argmax(dim=-1)
    return _draw(_filtered(logits / temperature, top_k, top_p), logits, generator)


def threshold_from_the_raw_logits(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # <- logits, not scores
        scores = scores.masked_fill(scores < kth, float("-inf"))
    return _draw(_filtered(scores, None, top_p), logits, generator)


def temperature_only_without_top_k(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is None:
        scores = logits / temperature
    else:
        scores = logits.clone()  # the temperature forgotten on this branch
    return _draw(_filtered(scores, top_k, top_p), logits, generator)


def tiny_temperature_for_greedy(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    temperature = max(temperature, 1e-6)  # "no division by zero": greedy by a one-hot draw
    return _draw(_filtered(logits / temperature, top_k, top_p), logits, generator)


def cut_to_a_tiny_logit(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """minGPT's first top-k: the cut logits set to 1e-10, which is not -inf."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = scores.topk(top_k, dim=-1).values[..., -1:]
        scores = torch.where(scores < kth, torch.full_like(scores, 1e-10), scores)
    return _draw(_filtered(scores, None, top_p), logits, generator)


def top_k_before_the_greedy_branch(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Top-k first, greedy after, the threshold kept as (B,): a crash on a batch."""
    if top_k is not None:
        top = torch.topk(logits, top_k)[0]
        smallest = top[:, -1]  # (B,): does not broadcast against (B, V)
        logits = torch.where(logits < smallest, torch.tensor(float("-inf")), logits)
    if temperature > 0:
        return _draw(_filtered(logits / temperature, None, top_p), logits, generator)
    return torch.argmax(logits, dim=-1)


def nucleus_indexed_flat(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """A one-row top-p recipe run on a batch: the removed ids index the batch axis."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = torch.topk(scores, top_k)[0][..., -1, None]
        scores[scores < kth] = float("-inf")
    if top_p is not None:
        sorted_scores, sorted_indices = torch.sort(scores, descending=True)
        cumulative = torch.cumsum(torch.softmax(sorted_scores, dim=-1), dim=-1)
        sorted_remove = cumulative > top_p
        sorted_remove[..., 1:] = sorted_remove[..., :-1].clone()
        sorted_remove[..., 0] = False
        scores[sorted_indices[sorted_remove]] = float("-inf")
    return _draw(torch.softmax(scores, dim=-1), logits, generator)


def nucleus_sorted_ascending(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, None)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1)  # ascending: descending=True forgotten
        drop = sorted_probs.cumsum(-1) - sorted_probs >= top_p
        probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0.0)
    return _draw(probs, logits, generator)


ISSUE_32 = [
    (fixed_seed_without_a_generator, "generator=None, two calls drew exactly the same ids"),
    (threshold_from_the_raw_logits, "top-k's threshold was taken from the logits before"),
    (temperature_only_without_top_k, "the temperature was ignored when top_k was given"),
    (tiny_temperature_for_greedy, "the ids are the argmax, but your code drew from the generator"),
    (cut_to_a_tiny_logit, "top-k set the cut tokens to a finite value, not -inf"),
    (top_k_before_the_greedy_branch, "keep the last axis, topk(k, dim=-1).values[..., -1:]"),
    (nucleus_indexed_flat, "the ids index the batch axis"),
    (nucleus_sorted_ascending, "top-p sorted the probabilities in ascending order"),
]


@pytest.mark.parametrize("answer, diagnosis", ISSUE_32, ids=[w[0].__name__ for w in ISSUE_32])
def test_issue_32_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and printed.startswith("❌ sample_next: "), printed
    assert diagnosis in printed, printed


def test_a_greedy_crash_is_not_blamed_on_the_division(verdict):
    passed, printed = verdict(check.sample_next, top_k_before_the_greedy_branch)
    assert "before using the temperature" not in printed, printed


def test_a_finite_cut_is_not_called_top_k_ignored(verdict):
    passed, printed = verdict(check.sample_next, cut_to_a_tiny_logit)
    assert "top_k was ignored" not in printed, printed


def test_an_ascending_nucleus_is_not_called_top_p_ignored(verdict):
    passed, printed = verdict(check.sample_next, nucleus_sorted_ascending)
    assert "top_p was ignored" not in printed, printed


def test_a_case_combines_top_k_with_a_temperature():
    assert any(c.top_k is not None and c.temperature != 1 for c in sampling.CASES)


# ----------------------------------------- ten more plausible wrong answers ----------


def top_k_positions_returned(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None and top_p is None:
        values, _ = scores.topk(top_k, dim=-1)  # the indices thrown away
        return _draw(values.softmax(dim=-1), logits, generator)
    return _draw(_filtered(scores, top_k, top_p), logits, generator)


def sorted_positions_returned(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, None)
    if top_p is not None:
        sorted_probs, _ = probs.sort(dim=-1, descending=True)
        keep = sorted_probs.cumsum(-1) - sorted_probs < top_p
        return _draw(sorted_probs * keep, logits, generator)  # a position, not a token id
    return _draw(probs, logits, generator)


def softmax_twice(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    return _draw(_filtered(probs, top_k, top_p), logits, generator)  # softmax of probabilities


def probabilities_divided(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits, top_k, top_p) / temperature  # multinomial renormalises it away
    return _draw(probs, logits, generator)


def log_probabilities_drawn(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    log_probs = torch.log_softmax(logits / temperature, dim=-1)
    return _draw(log_probs, logits, generator)


def one_draw_for_the_batch(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, top_p).reshape(-1, logits.shape[-1])
    token = torch.multinomial(probs[0], 1, generator=generator)  # one draw ...
    return token.expand(probs.shape[0]).reshape(logits.shape[:-1])  # ... for every row


def generator_only_without_filters(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, top_p).reshape(-1, logits.shape[-1])
    if top_k is None and top_p is None:
        ids = torch.multinomial(probs, 1, generator=generator)
    else:
        ids = torch.multinomial(probs, 1)  # generator= forgotten on this branch
    return ids.reshape(logits.shape[:-1])


def new_generator_when_filtering(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is not None or top_p is not None:
        generator = torch.Generator()  # a fresh one: always the default seed
    return _draw(_filtered(logits / temperature, top_k, top_p), logits, generator)


def top_k_strictly_above(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = scores.topk(top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(~(scores > kth), float("-inf"))  # the k-th itself cut
    return _draw(_filtered(scores, None, top_p), logits, generator)


def top_k_sorted_ascending(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = scores.sort(dim=-1).values[..., top_k - 1 : top_k]  # the k-th smallest
        scores = scores.masked_fill(scores < kth, float("-inf"))
    return _draw(_filtered(scores, None, top_p), logits, generator)


def scores_aliased_at_temperature_one(logits, temperature=1.0, top_k=None, top_p=None,
                                      generator=None):  # fmt: skip
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits if temperature == 1 else logits / temperature  # no copy at 1
    if top_k is not None:
        kth = scores.topk(top_k, dim=-1).values[..., -1:]
        scores[scores < kth] = float("-inf")  # writes into the caller's logits
    return _draw(_filtered(scores, None, top_p), logits, generator)


MORE = [
    (top_k_positions_returned, "the ids drawn are positions in the top-k list (0 .. 2)"),
    (sorted_positions_returned, "the ids drawn are positions in the sorted order"),
    (softmax_twice, "the softmax was applied twice"),
    (probabilities_divided, "the temperature was ignored: divide the logits by it"),
    (log_probabilities_drawn, "torch.multinomial takes probabilities, each >= 0 and finite"),
    (one_draw_for_the_batch, "rows got the same id"),
    (generator_only_without_filters, "generator given: your code drew from torch's global"),
    (new_generator_when_filtering, "two calls with the same generator drew exactly the same"),
    (top_k_strictly_above, "top-k kept k - 1 tokens"),
    (top_k_sorted_ascending, "top-k's threshold is the k-th *smallest* logit"),
    (scores_aliased_at_temperature_one, "changed one of its input tensors in place"),
]


@pytest.mark.parametrize("answer, diagnosis", MORE, ids=[w[0].__name__ for w in MORE])
def test_more_mistakes_are_named(answer, diagnosis, verdict):
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and printed.startswith("❌ sample_next: "), printed
    assert diagnosis in printed, printed
