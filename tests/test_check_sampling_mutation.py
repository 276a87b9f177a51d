"""The lesson 12 checker, sample_next: behaviour that tools/mutation.py found no test pinned
down (issue 32). Each test asserts what a learner sees: the verdict, and the key words of
its message.
"""

import math
import re

import pytest
import torch
from test_check_sampling import _draw, _filtered  # the right filters, shared

from course import check, lm


def _raises_with_top_k(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if top_k is not None:
        raise ValueError("boom")
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def test_a_crash_shows_the_generator_it_was_given_by_its_seed(verdict):
    """The message shows the inputs of the failing call: the generator as the code that
    makes it, with its seed, so that the learner can rerun the very call."""
    passed, printed = verdict(check.sample_next, _raises_with_top_k)
    assert passed is False and "your code raised ValueError: boom" in printed, printed
    assert re.search(r"generator=torch\.Generator\(\)\.manual_seed\(\d+\)", printed), printed
    assert "object at 0x" not in printed, printed
    assert "temperature=0.0" in printed, printed  # it crashed in the greedy check
    assert "greedy" not in printed, printed  # an error unrelated to the temperature: no hint


# ---------------------------------------- a failure names its case and what was seen ----


def boundary_dropped(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, None)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        drop = sorted_probs.cumsum(-1) > top_p  # the token that crosses p dropped too
        probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0.0)
    return _draw(probs, logits, generator)


def k_minus_one(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    k = None if top_k is None else top_k - 1  # "topk(k - 1) because of 0-based indices"
    return _draw(_filtered(logits / temperature, k, top_p), logits, generator)


def multiplied(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    return _draw(_filtered(logits * temperature, top_k, top_p), logits, generator)


def kth_of_the_first_row(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """A one-row top-k recipe on a batch: every row cut at row 0's k-th largest."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = scores.reshape(-1, scores.shape[-1])[0].topk(top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    return _draw(_filtered(scores, None, top_p), logits, generator)


def nucleus_of_the_first_row(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """A one-row top-p recipe on a batch: every row keeps row 0's nucleus."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, None)
    if top_p is not None:
        flat = probs.reshape(-1, probs.shape[-1])
        sorted_probs, order = flat[0].sort(descending=True)
        drop = sorted_probs.cumsum(-1) - sorted_probs >= top_p
        keep = torch.ones(flat.shape[-1], dtype=torch.bool)
        keep[order[drop]] = False
        probs = probs * keep
    return _draw(probs, logits, generator)


def root_of_the_temperature(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    return _draw(_filtered(logits / temperature**0.5, top_k, top_p), logits, generator)


_ONE_ROW = r"on logits \[[-\d., ]+\] with "  # one row's logits, shown; no dtype, contiguous
NAMED_CASES = [
    (boundary_dropped, _ONE_ROW + r"temperature=1\.0, top_p=0\.5: top-p dropped the boundary"),
    (k_minus_one, _ONE_ROW + r"temperature=1\.0, top_k=3: top-k kept k - 1 tokens"),
    (multiplied, _ONE_ROW + r"temperature=2\.0: the logits were multiplied by the temperature"),
    (
        kth_of_the_first_row,
        r"on a batch of 3 different rows of logits with temperature=1\.0, top_k=2: token \d "
        r"\(row [12]\) has probability 0\.\d{3} but was never drawn in \d+ draws \(it should "
        r"be kept\)",
    ),
    (
        nucleus_of_the_first_row,
        r"on a batch of 3 different rows of logits \(float64, non-contiguous\) with "
        r"temperature=1\.0, top_p=0\.5: token \d \(row [12]\) was drawn \d+ times in \d+ draws, "
        r"but its probability is 0 here \(it should be cut\)",
    ),
    (
        root_of_the_temperature,
        _ONE_ROW + r"temperature=[\d.]+: token \d was drawn \d+\.\d% of the time, but its "
        r"probability is \d+\.\d% \(a right sampler stays within ±\d\.\d% of it\)",
    ),
]


@pytest.mark.parametrize("answer, shown", NAMED_CASES, ids=[a.__name__ for a, _ in NAMED_CASES])
def test_a_failure_names_its_case_and_what_the_draws_showed(answer, shown, verdict):
    """Where a wrong answer fails: the logits (one row shown, or a batch said so), the
    dtype and layout when they are not float32 and contiguous, the settings given and only
    those; then the mistake, or the token, row and counts that give it away."""
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and printed.startswith("❌ sample_next: "), printed
    assert re.search(shown, printed), printed
    assert "None" not in printed, printed


def temperature_only_without_top_p(logits, temperature=1.0, top_k=None, top_p=None,
                                   generator=None):  # fmt: skip
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits if top_p is not None else logits / temperature  # forgotten on one branch
    return _draw(_filtered(scores, top_k, top_p), logits, generator)


def temperature_ignored(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    return _draw(_filtered(logits, top_k, top_p), logits, generator)


def test_a_temperature_ignored_with_top_p_is_told_to_divide_before_filtering(verdict):
    passed, printed = verdict(check.sample_next, temperature_only_without_top_p)
    assert passed is False, printed
    assert (
        "the temperature was ignored when top_p was given: divide the logits by it before "
        "the softmax, then filter" in printed
    ), printed


def test_a_temperature_ignored_without_filters_is_told_no_more_than_to_divide(verdict):
    passed, printed = verdict(check.sample_next, temperature_ignored)
    assert passed is False, printed
    assert printed.rstrip("\n").endswith(
        "with temperature=2.0: the temperature was ignored: divide the logits by it before "
        "the softmax"
    ), printed


def view_instead_of_reshape(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    flat = logits.view(-1)  # fails on a non-contiguous tensor
    return lm.sample_next(flat.view(logits.shape), temperature, top_k, top_p, generator)


def test_only_the_non_contiguous_case_breaks_view(verdict):
    """.view works on contiguous logits: the one non-contiguous case (the float64 batch of
    three rows with top_p) is where it fails, and the message shows that call."""
    passed, printed = verdict(check.sample_next, view_instead_of_reshape)
    assert passed is False and "use .reshape(...) instead of .view(...)" in printed, printed
    shown = r"on inputs logits \(\d+, 6\), temperature=1\.0, top_k=None, top_p=0\.5, "
    assert re.search(shown, printed), printed


# ------------------------------------------------------------------- top-k's words ----


def top_k_ignored_with_top_p(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_p is not None:  # an elif: top-k only when top-p is not given
        top_k = None
    return _draw(_filtered(logits / temperature, top_k, top_p), logits, generator)


def strictly_above_the_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:  # everything above the (k+1)-th: fewer than k when the k-th is tied
        cut = scores.topk(top_k + 1, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores <= cut, float("-inf"))
    return _draw(_filtered(scores, None, top_p), logits, generator)


TOP_K_WORDS = [
    (
        top_k_ignored_with_top_p,
        "top_k was ignored when top_p was given too: keep only the k most probable tokens "
        "(then apply top-p, if given)",
    ),
    (k_minus_one, "top-k kept k - 1 tokens: with top_k=3 you kept 2, an off-by-one"),
    (
        strictly_above_the_next,
        "the k-th largest logit (k=3) here is shared by several tokens, and you kept fewer "
        "than top_k=3. Keep every token whose logit is >= the k-th largest",
    ),
]


@pytest.mark.parametrize("answer, words", TOP_K_WORDS, ids=[a.__name__ for a, _ in TOP_K_WORDS])
def test_top_k_mistakes_are_said_with_the_k_asked(answer, words, verdict):
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and printed.startswith("❌ sample_next: "), printed
    assert words in printed, printed


# ------------------------------------------------------- tiny temperatures' claim ----


def test_the_tiny_temperature_rows_are_as_nearly_greedy_as_the_message_says():
    """The message for a wrong answer at temperature 0.01 says the row's most probable
    token has probability 1 - 1e-20 or more: every row it is judged on must have one
    largest logit that far above the others."""
    from course.check import sampling

    rows = torch.tensor((*sampling._ROWS, sampling._TIES), dtype=torch.float64)
    for temperature in (0.01, 0.001):
        log_probs = (rows / temperature).log_softmax(dim=-1)
        others = log_probs.sort(dim=-1, descending=True).values[:, 1:].logsumexp(dim=-1)
        assert bool((others <= math.log(1e-20)).all()), (temperature, others)


def top_p_ignored_with_top_k(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is not None:  # an elif: top-p only when top-k is not given
        top_p = None
    return _draw(_filtered(logits / temperature, top_k, top_p), logits, generator)


def test_top_p_ignored_is_told_what_the_nucleus_is(verdict):
    passed, printed = verdict(check.sample_next, top_p_ignored_with_top_k)
    assert passed is False, printed
    assert (
        "top_p was ignored when top_k was given too: keep the smallest set of most probable "
        "tokens whose probability reaches p" in printed
    ), printed


# ------------------------------------------------------------ the result itself ----


def returns_a_python_int(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return int(lm.sample_next(logits, temperature, top_k, top_p, generator).flatten()[0])


def returns_float_ids(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return lm.sample_next(logits, temperature, top_k, top_p, generator).float()


def keeps_the_sample_axis(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, top_p)
    if probs.dim() == 1:
        return torch.multinomial(probs, 1, generator=generator)[0]
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)


def one_based_ids(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    return lm.sample_next(logits, temperature, top_k, top_p, generator) + 1  # ids 1 .. V


def ids_from_the_end(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return lm.sample_next(logits, temperature, top_k, top_p, generator) - logits.shape[-1]


def naive_exp(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = scores.topk(top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    exp = torch.exp(scores)  # no max subtracted: overflows at a tiny temperature
    return _draw(_filtered((exp / exp.sum(dim=-1, keepdim=True)).log(), None, top_p), logits,
                 generator)  # fmt: skip


_V_ROW = "on logits of shape (V,) = (6,) (one row), temperature=1.0: "
_B_ROWS = "on logits of shape (B, V) = (3, 6), temperature=1.0: "
RESULTS = [
    (returns_a_python_int, _V_ROW + "the result should be a torch.Tensor of token ids, got a int"),
    (returns_float_ids, _V_ROW + "the ids should be integers (torch.long), got float32"),
    (
        keeps_the_sample_axis,
        _B_ROWS + "the ids have shape (3, 1), expected (3,): torch.multinomial(probs, 1) gives "
        "(B, 1)",
    ),
    (one_based_ids, "ids must be token ids 0 .. 5, got "),
    (ids_from_the_end, _V_ROW + "ids must be token ids 0 .. 5, got -"),
    (
        naive_exp,
        "your code raised RuntimeError: probability tensor contains either `inf`, `nan` or "
        "element < 0. at temperature=0.01 the scores logits / temperature are in the hundreds",
    ),
]


@pytest.mark.parametrize("answer, said", RESULTS, ids=[a.__name__ for a, _ in RESULTS])
def test_a_wrong_result_is_described_where_it_came(answer, said, verdict):
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and printed.startswith("❌ sample_next: "), printed
    assert said in printed, printed


def threshold_of_shape_b(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Greedy first, then a top-k threshold kept as (B,): a crash on a batch."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = torch.topk(scores, top_k)[0][:, -1]  # (B,): does not broadcast against (B, V)
        scores = torch.where(scores < kth, torch.tensor(float("-inf")), scores)
    return _draw(_filtered(scores, None, top_p), logits, generator)


def test_a_threshold_of_the_wrong_shape_is_explained_where_a_case_crashes(verdict):
    passed, printed = verdict(check.sample_next, threshold_of_shape_b)
    assert passed is False and "temperature=1.0, top_k=3, top_p=None" in printed, printed
    assert "Top-k's threshold, topk(k).values[:, -1], has shape (B,)" in printed, printed


# ------------------------------------------------ the two cases of top-k with top-p ----


def test_each_case_of_both_filters_confounds_the_full_nucleus_with_one_filter_ignored():
    """As the checker's comment above BOTH says: the nucleus measured on the full
    distribution keeps, in the first case, what ignoring top_k keeps, and in the second
    what ignoring top_p keeps; in each, that distribution is told apart from the right one.
    So only the two cases together can name "top-p applied before top-k" (and not one
    filter ignored), and an answer that ignores one filter fails in one of them."""
    from course.check import sampling

    first, second = (case.mistakes() for case in sampling.BOTH)
    for mistakes, ignored in ((first, "k ignored"), (second, "p ignored")):
        assert "full nucleus" in mistakes and ignored in mistakes, sorted(mistakes)
        assert torch.allclose(mistakes["full nucleus"][1], mistakes[ignored][1])


def clamped_probabilities(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """The probabilities clamped "because torch.multinomial fails on zeros": cut tokens keep 1%."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, top_p).clamp(min=0.01)
    return _draw(probs, logits, generator)


def test_a_cut_token_drawn_now_and_then_fails(verdict):
    """A cut token drawn about 1% of the time is within the frequency tolerance (about 6%):
    the support check is what catches it."""
    passed, printed = verdict(check.sample_next, clamped_probabilities)
    assert passed is False, printed
    assert "top_k=3: token" in printed, printed
    assert "but its probability is 0 here (it should be cut)" in printed, printed


def draws_from_the_global_generator(logits, temperature=1.0, top_k=None, top_p=None,
                                    generator=None):  # fmt: skip
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, top_p)
    return torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1).reshape(logits.shape[:-1])


def one_draw_for_every_row(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, top_p).reshape(-1, logits.shape[-1])
    token = torch.multinomial(probs[0], 1, generator=generator)
    return token.expand(probs.shape[0]).reshape(logits.shape[:-1])


def nucleus_before_top_k(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, None, top_p)  # top-p on the full distribution
    if top_k is not None:
        kth = probs.topk(top_k, dim=-1).values[..., -1:]
        probs = probs.masked_fill(probs < kth, 0.0)
    return _draw(probs, logits, generator)


MORE_CASES = [
    (
        draws_from_the_global_generator,
        _ONE_ROW + r"temperature=1\.0, generator given: your code drew from torch's global "
        r"random generator",
    ),
    (
        one_draw_for_every_row,
        _ONE_ROW + r"temperature=1\.0: every one of the \d+ rows got the same id, \d: one id is "
        r"drawn per row",
    ),
    (
        nucleus_before_top_k,
        _ONE_ROW + r"temperature=1\.0, top_k=4, top_p=0\.7: top-p must be applied after top-k",
    ),
]


@pytest.mark.parametrize("answer, shown", MORE_CASES, ids=[a.__name__ for a, _ in MORE_CASES])
def test_more_failures_name_their_case(answer, shown, verdict):
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and printed.startswith("❌ sample_next: "), printed
    assert re.search(shown, printed), printed


# ------------------------------------------------------------------- temperature 0 ----


def argmax_of_everything(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax()  # dim=-1 forgotten: one id for the whole batch
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def greedy_only_without_filters(logits, temperature=1.0, top_k=None, top_p=None,
                                generator=None):  # fmt: skip
    if temperature == 0 and top_k is None and top_p is None:
        return logits.argmax(dim=-1)
    temperature = max(temperature, 1e-6)  # "nearly greedy" with the filters
    return _draw(_filtered(logits / temperature, top_k, top_p), logits, generator)


GREEDY = [
    (
        argmax_of_everything,
        "on logits of shape (4, 6) with temperature=0: the ids have shape (), expected (4,): "
        "one id per row of logits",
    ),
    (
        greedy_only_without_filters,
        "on logits of shape (4, 6) with temperature=0, top_k=2, top_p=0.5: the ids are the "
        "argmax, but your code drew from the generator it was given (its state moved)",
    ),
]


@pytest.mark.parametrize("answer, said", GREEDY, ids=[a.__name__ for a, _ in GREEDY])
def test_a_greedy_failure_names_the_call(answer, said, verdict):
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and said in printed, printed


def argsort_for_argmax(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argsort(dim=-1)[..., 0]  # argsort is ascending: the least probable
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def one_hot_draw_for_greedy(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:  # a one-hot distribution, drawn from the global generator
        one_hot = torch.nn.functional.one_hot(logits.argmax(dim=-1), logits.shape[-1])
        flat = one_hot.reshape(-1, logits.shape[-1]).double()
        return torch.multinomial(flat, 1).reshape(logits.shape[:-1])
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def test_a_greedy_answer_that_is_not_the_argmax_is_shown_both(verdict):
    passed, printed = verdict(check.sample_next, argsort_for_argmax)
    assert passed is False, printed
    assert re.search(
        r"on logits of shape \(4, 6\) with temperature=0: got ids \[[\d, ]+\], expected the "
        r"argmax of each row, \[[\d, ]+\]\. temperature=0 means greedy",
        printed,
    ), printed


def test_a_greedy_draw_from_the_global_generator_says_which_generator(verdict):
    passed, printed = verdict(check.sample_next, one_hot_draw_for_greedy)
    assert passed is False, printed
    assert "the ids are the argmax, but your code drew from torch's global generator" in printed


# --------------------------------------------------- the generator, tiny temperatures ----


def reseeded(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if generator is not None and temperature != 0:
        generator.manual_seed(0)  # "for reproducibility": every call draws the same ids
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def new_generator_when_filtering(logits, temperature=1.0, top_k=None, top_p=None,
                                 generator=None):  # fmt: skip
    if top_k is not None or top_p is not None:
        generator = torch.Generator()  # a fresh one: always the default seed
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def temperature_floored(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    temperature = max(temperature, 0.1)  # "a small temperature overflows": floored at 0.1
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def generator_required(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if generator is None:
        raise ValueError("a generator is needed: pass generator=torch.Generator()")
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def fixed_seed_without_a_generator(logits, temperature=1.0, top_k=None, top_p=None,
                                   generator=None):  # fmt: skip
    if generator is None:
        generator = torch.Generator().manual_seed(0)  # "reproducible by default"
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def fixed_seed_when_filtering(logits, temperature=1.0, top_k=None, top_p=None,
                              generator=None):  # fmt: skip
    if generator is None and (top_k is not None or top_p is not None):
        generator = torch.Generator()  # the default seed, on the filtered path only
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


_PLAIN = r"on logits \(200, V\) with temperature=[\d.]+"  # the generator's checks, no filter
_FILTERED = _PLAIN + r", top_k=\d, top_p=[\d.]+"  # and with every filter on
LATER = [
    (
        fixed_seed_without_a_generator,
        _PLAIN + r" and generator=None, two calls drew exactly the same ids",
    ),
    (
        fixed_seed_when_filtering,
        _FILTERED + r" and generator=None, two calls drew exactly the same ids",
    ),
    (reseeded, _PLAIN + r": two calls with the same generator drew exactly the same ids"),
    (
        new_generator_when_filtering,
        _FILTERED + r": two calls with the same generator drew exactly the same ids",
    ),
    (temperature_floored, r"on logits \(2000, V\) with temperature=0\.01: "),
    (generator_required, r"generator=None must work: torch\.multinomial accepts it"),
]


@pytest.mark.parametrize(
    "answer, said", LATER, ids=[f"{a.__name__}-{i}" for i, (a, _) in enumerate(LATER)]
)
def test_the_later_checks_say_what_they_called(answer, said, verdict):
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and printed.startswith("❌ sample_next: "), printed
    assert re.search(said, printed), printed


def test_a_pass_says_what_was_judged(verdict):
    passed, printed = verdict(check.sample_next, lm.sample_next)
    assert passed is True, printed
    assert re.match(
        r"✅ sample_next: passed \(\d+ distributions judged on \d+ draws per row \(temperature, "
        r"top-k with and without ties and with a temperature, top-p's boundary token, both "
        r"together, a batch, float64 and non-contiguous\), temperature 0 greedy",
        printed,
    ), printed


def boundary_dropped_with_both_filters(logits, temperature=1.0, top_k=None, top_p=None,
                                       generator=None):  # fmt: skip
    """Its own code for top-k with top-p, where the nucleus drops the boundary token."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is None or top_p is None:
        return lm.sample_next(logits, temperature, top_k, top_p, generator)
    probs = _filtered(logits / temperature, top_k, None)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    drop = sorted_probs.cumsum(-1) > top_p
    probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0.0)
    return _draw(probs, logits, generator)


def reseeds_from_the_clock(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if generator is not None and temperature != 0:
        generator.seed()  # "seed it": a new, non-deterministic seed on every call
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


def test_a_nucleus_left_empty_is_explained_by_the_boundary_token(verdict):
    """With top-2 renormalised to (0.68, 0.32) and top_p=0.6, dropping the token that
    crosses p leaves nothing to draw: torch.multinomial's error gets the reason."""
    passed, printed = verdict(check.sample_next, boundary_dropped_with_both_filters)
    assert passed is False and "top_k=2, top_p=0.6" in printed, printed
    assert (
        "with top_p=0.6 no token was left to draw: the most probable token always reaches p on "
        "its own or with others, so it is kept; top-p dropped the boundary token"
    ) in printed, printed


def test_a_generator_reseeded_inside_is_not_reproducible(verdict):
    passed, printed = verdict(check.sample_next, reseeds_from_the_clock)
    assert passed is False, printed
    said = (
        _PLAIN + r": two generators seeded alike \(torch\.Generator\(\)\.manual_seed\(\d+\)\) gave"
    )
    assert re.search(said, printed), printed


def top_k_first_for_a_batch_only(logits, temperature=1.0, top_k=None, top_p=None,
                                 generator=None):  # fmt: skip
    """Top-k before the greedy branch, indexed as a batch: [:, -1:] on one row fails."""
    if top_k is not None:
        kth = logits.topk(top_k).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if temperature == 0:
        return logits.argmax(dim=-1)
    return _draw(_filtered(logits / temperature, None, top_p), logits, generator)


def test_a_batch_only_index_on_one_row_is_explained(verdict):
    passed, printed = verdict(check.sample_next, top_k_first_for_a_batch_only)
    assert passed is False and "IndexError: too many indices" in printed, printed
    assert "a single row of logits (V,) has no batch axis: work on the last axis" in printed


def test_a_temperature_floored_at_0_1_is_told_how_many_draws_missed_the_argmax(verdict):
    """At temperature 0.1 instead of 0.01 the argmax still wins most draws (the others are
    0.5 or more below it): the count given is of the draws that missed it, a few of 2000."""
    passed, printed = verdict(check.sample_next, temperature_floored)
    assert passed is False, printed
    found = re.search(r": (\d+) of 2000 draws are not the row's most probable token", printed)
    assert found and 0 < int(found.group(1)) < 1000, printed


def threshold_from_the_wrong_end(logits, temperature=1.0, top_k=None, top_p=None,
                                 generator=None):  # fmt: skip
    """values[..., :1] (the largest) taken for the k-th largest, and the tokens at or below
    it cut: every score of a row becomes -inf."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = scores.topk(top_k, dim=-1).values[..., :1]
        scores = scores.masked_fill(scores <= kth, float("-inf"))
    return _draw(_filtered(scores, None, top_p), logits, generator)


def probabilities_cut_from_the_wrong_end(logits, temperature=1.0, top_k=None, top_p=None,
                                         generator=None):  # fmt: skip
    """The same on the probabilities: every probability of a row set to 0."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, None, top_p)
    if top_k is not None:
        kth = probs.topk(top_k, dim=-1).values[..., :1]
        probs = probs.masked_fill(probs <= kth, 0.0)
    return _draw(probs, logits, generator)


def one_draw_kept_as_a_vector(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = _filtered(logits / temperature, top_k, top_p)
    if probs.dim() == 1:
        return torch.multinomial(probs, 1, generator=generator)  # (1,) for one row
    return _draw(probs, logits, generator)


CRASHES = [
    (
        threshold_from_the_wrong_end,
        "top_k=3, top_p=None",
        "Some row's probabilities hold NaN, inf or negative values (a row whose every token is "
        "cut to -inf gives NaN)",
    ),
    (
        probabilities_cut_from_the_wrong_end,
        "top_k=3, top_p=None",
        "no token was left to draw: top-k must keep at least k tokens",
    ),
    (
        one_draw_kept_as_a_vector,
        "on logits of shape (V,) = (6,) (one row)",
        "the ids have shape (1,), expected (): take the single id, ids[0]",
    ),
]


@pytest.mark.parametrize("answer, where, said", CRASHES, ids=[a.__name__ for a, *_ in CRASHES])
def test_a_row_left_without_tokens_or_a_single_id_kept_as_a_vector_is_explained(
    answer, where, said, verdict
):
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and where in printed and said in printed, printed


# ------------------------------- mistakes that a case could confuse with one another ----


def ignores_top_p(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = scores.topk(top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)  # top_p never used
    return torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator).reshape(
        logits.shape[:-1]
    )


def nucleus_in_ascending_order(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits / temperature
    if top_k is not None:
        kth = scores.topk(top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if top_p is not None:
        sorted_probs, order = torch.sort(probs, dim=-1)  # descending=True forgotten
        remove = torch.cumsum(sorted_probs, dim=-1) - sorted_probs >= top_p
        probs = probs.masked_fill(remove.scatter(-1, order, remove), 0.0)
    return torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator).reshape(
        logits.shape[:-1]
    )


def ignores_top_k(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)  # top_k never used
    if top_p is not None:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        remove = torch.cumsum(sorted_probs, dim=-1) - sorted_probs >= top_p
        probs = probs.masked_fill(remove.scatter(-1, order, remove), 0.0)
    return torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1, generator=generator).reshape(
        logits.shape[:-1]
    )


def _cut_to(value):
    """minGPT's first top-k (cut logits set to 1e-10), or the same with 0: not -inf."""

    def cut_to_a_finite_value(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        if temperature == 0:
            return logits.argmax(dim=-1)
        scores = logits / temperature
        if top_k is not None:
            kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]
            scores = torch.where(scores < kth, torch.full_like(scores, value), scores)
        probs = torch.softmax(scores, dim=-1)
        if top_p is not None:
            sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
            remove = torch.cumsum(sorted_probs, dim=-1) - sorted_probs >= top_p
            probs = probs.masked_fill(remove.scatter(-1, order, remove), 0.0)
        flat = probs.reshape(-1, probs.shape[-1])
        return torch.multinomial(flat, 1, generator=generator).reshape(logits.shape[:-1])

    cut_to_a_finite_value.__name__ = f"cut_to_{value}"
    return cut_to_a_finite_value


_P_IGNORED = "top_p was ignored: keep the smallest set of most probable tokens"
_ASCENDING = "top-p sorted the probabilities in ascending order"
_K_IGNORED = "top_k was ignored: keep only the k most probable tokens"
_FINITE = "top-k set the cut tokens to a finite value, not -inf"
CONFUSABLE = [  # (the answer, the words of its own mistake, the other mistake's key words)
    (ignores_top_p, _P_IGNORED, "ascending"),
    (nucleus_in_ascending_order, _ASCENDING, "top_p was ignored"),
    (ignores_top_k, _K_IGNORED, "finite value"),
    (_cut_to(1e-10), _FINITE, "top_k was ignored"),
    (_cut_to(0.0), _FINITE, "top_k was ignored"),
]


@pytest.mark.parametrize("answer, own, other", CONFUSABLE, ids=[a.__name__ for a, *_ in CONFUSABLE])
def test_a_mistake_is_named_as_itself_not_as_one_that_samples_alike(answer, own, other, verdict):
    """Ignoring top_p and an ascending nucleus sample alike where the ascending nucleus keeps
    every token; ignoring top_k and cutting to a finite value sample alike where the cut
    tokens' logits are near that value. Each is named as itself, not as the other."""
    passed, printed = verdict(check.sample_next, answer)
    assert passed is False and printed.startswith("❌ sample_next: "), printed
    assert own in printed and other not in printed, printed


# ------------------------------------------------------ the rows of a batch kept apart ----


def ranks_from_the_first_row(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Top-k through topk's values and indices, then B ranks drawn at once from the first
    row's top-k probabilities: each row keeps its own k tokens, in row 0's proportions."""
    if top_k is None or top_p is not None or temperature == 0:
        return lm.sample_next(logits, temperature, top_k, top_p, generator)
    scores = (logits / temperature).reshape(-1, logits.shape[-1])  # (B, V)
    values, indices = scores.topk(top_k, dim=-1)  # (B, k) each
    probs = values.softmax(dim=-1)  # (B, k)
    ranks = torch.multinomial(probs[0], probs.shape[0], replacement=True, generator=generator)
    return indices.gather(-1, ranks[:, None]).squeeze(-1).reshape(logits.shape[:-1])


def ranks_when_both(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Both filters in the top-k's sorted order, and the rank returned, not the token id."""
    if temperature == 0 or top_k is None or top_p is None:
        return lm.sample_next(logits, temperature, top_k, top_p, generator)
    values, indices = (logits / temperature).topk(top_k, dim=-1)  # (..., k) each, sorted
    probs = values.softmax(dim=-1)
    kept = probs * (probs.cumsum(dim=-1) - probs < top_p)
    drawn = torch.multinomial(kept.reshape(-1, top_k), 1, generator=generator)  # (B, 1)
    return drawn.reshape(logits.shape[:-1])  # <- indices.gather(-1, drawn) forgotten


def unsqueezed_without_generator(logits, temperature=1.0, top_k=None, top_p=None,
                                 generator=None):  # fmt: skip
    """A branch of its own for generator=None, where the sample axis is not removed."""
    if generator is None and temperature != 0:
        probs = torch.softmax(logits / temperature, dim=-1)
        return torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1)  # (B, 1)
    return lm.sample_next(logits, temperature, top_k, top_p, generator)


BATCHES = [
    (
        ranks_from_the_first_row,
        r"on a batch of 3 different rows of logits with temperature=1\.0, top_k=2: token \d "
        r"\(row [12]\) was drawn [\d.]+% of the time, but its probability is",
    ),
    (
        ranks_when_both,
        r"on logits \[1\.2, .*\] with temperature=1\.0, top_k=4, top_p=0\.7: the ids drawn are "
        r"positions in the sorted order",
    ),
    (
        unsqueezed_without_generator,
        r"on logits \(3, V\) with generator=None: the ids have shape \(3, 1\), expected \(3,\)",
    ),
]


@pytest.mark.parametrize("answer, shown", BATCHES, ids=[a.__name__ for a, _ in BATCHES])
def test_a_batch_mistake_names_the_row_or_the_call(answer, shown, verdict):
    test_more_failures_name_their_case(answer, shown, verdict)  # the same verdict, other answers


# -------------------------------------------------- a crash at temperature 0, by its error ----


def _greedy_by(step):
    """An answer that runs `step` on (logits, temperature) at temperature 0, else the
    course's sampler."""

    def answer(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
        if temperature == 0:
            return step(logits, temperature)
        return lm.sample_next(logits, temperature, top_k, top_p, generator)

    answer.__name__ = step.__name__
    return answer


def refuses_zero(logits, temperature):
    raise ValueError(f"temperature must be positive, got {temperature}")


def argmax_over_dim_1(logits, temperature):
    return logits.argmax(dim=1)  # right on a batch, out of range on one row (V,)


def categorical_of_the_divided(logits, temperature):
    return torch.distributions.Categorical(probs=(logits / temperature).softmax(-1)).sample()


def multiplied_by_the_inverse(logits, temperature):
    return torch.multinomial((logits * (1 / temperature)).softmax(-1), 1)[..., 0]


def log_of_the_temperature(logits, temperature):
    return torch.multinomial((logits - math.log(temperature)).softmax(-1), 1)[..., 0]


_DIVIDED = "temperature=0 means greedy: return logits.argmax(dim=-1) before using the temperature"
GREEDY_CRASHES = [
    (refuses_zero, "ValueError: temperature must be positive", "temperature=0 is a valid input"),
    (argmax_over_dim_1, "IndexError: Dimension out of range", "has no batch axis"),
    (categorical_of_the_divided, "ValueError: Expected parameter probs", _DIVIDED),
    (multiplied_by_the_inverse, "ZeroDivisionError: float division by zero", _DIVIDED),
    (log_of_the_temperature, "ValueError: math domain error", _DIVIDED),
]


@pytest.mark.parametrize(
    "step, error, hint", GREEDY_CRASHES, ids=[s.__name__ for s, *_ in GREEDY_CRASHES]
)
def test_a_crash_at_temperature_0_gets_the_hint_its_error_calls_for(step, error, hint, verdict):
    passed, printed = verdict(check.sample_next, _greedy_by(step))
    assert passed is False and "temperature=0.0" in printed, printed
    assert f"your code raised {error}" in printed and hint in printed, printed
    if hint != _DIVIDED:  # not blamed on a division it does not make
        assert _DIVIDED not in printed, printed
