"""More wrong greedy_decode answers, each held to its whole message (issue 7: mutation
testing of course/check/decoding.py showed messages and branches no test pinned down).

Each answer is one a learner writes; each test asserts the checker's exact words, the case
it names and the numbers it quotes, so a message that loses a value or a word fails here.
"""

import pytest
import torch

from course import check
from course.check.decoding import _CASES
from course.masking import padding_mask

CASE = [case.what for case in _CASES]
FEED = (
    "Each step must feed the decoder the whole prefix, <bos> and every token chosen so far, "
    "and take the last position's logits, logits[:, -1]"
)


def _steps(model, src, max_len, bos_id, eos_id, *, steps=None, fed=None, pad=None):
    """The lesson's loop; `steps` overrides the number of steps, `fed(tokens)` what the
    decoder reads, `pad` the id written after <eos>."""
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)  # (B, 1, 1, T_src)
    memory = model.encode(src, src_mask)  # (B, T_src, d_model)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)  # (B, 1)
    done = torch.zeros(B, dtype=torch.bool)  # (B,)
    for _ in range(max_len if steps is None else steps(max_len)):
        logits = model.decode(tokens if fed is None else fed(tokens), memory, src_mask)
        next_token = logits[:, -1].argmax(dim=-1)  # (B,)
        next_token = next_token.masked_fill(done, model.pad_id if pad is None else pad)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, t + 1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return tokens[:, 1:]


@torch.no_grad()
def good(model, src, max_len, bos_id, eos_id):
    return _steps(model, src, max_len, bos_id, eos_id)


def squeezes_the_output(model, src, max_len, bos_id, eos_id):
    return good(model, src, max_len, bos_id, eos_id).squeeze()  # <- (9,) for a batch of one


def squeezes_the_time_axis(model, src, max_len, bos_id, eos_id):
    return good(model, src, max_len, bos_id, eos_id).squeeze(1)  # <- (B,) when T_out = 1


def item_on_the_batch(model, src, max_len, bos_id, eos_id):
    """Stops on one sentence's <eos> with .item(): B tokens cannot be one number."""
    out = _steps(model, src, 1, bos_id, eos_id)
    if out[:, -1].item() == eos_id:  # <- RuntimeError for B > 1
        return out
    return good(model, src, max_len, bos_id, eos_id)


def two_steps_too_few(model, src, max_len, bos_id, eos_id):
    return _steps(model, src, max_len, bos_id, eos_id, steps=lambda n: n - 2)  # <-


def stop_tested_before_done_is_updated(model, src, max_len, bos_id, eos_id):
    """`if done.all(): break` before `done = done | ...`: one more step, padding only."""
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)
        next_token = next_token.masked_fill(done, model.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        if done.all():  # <- tested with the done of the step before
            break
        done = done | (next_token == eos_id)
    return tokens[:, 1:]


def two_steps_too_many(model, src, max_len, bos_id, eos_id):
    return _steps(model, src, max_len, bos_id, eos_id, steps=lambda n: n + 2)  # <-


def drops_bos_after_the_first_step(model, src, max_len, bos_id, eos_id):
    """Feeds <bos> first, then only the tokens chosen (without <bos>)."""
    return _steps(model, src, max_len, bos_id, eos_id,
                  fed=lambda tokens: tokens if tokens.shape[1] == 1 else tokens[:, 1:])  # fmt: skip


def pads_the_output_with_ignore_index(model, src, max_len, bos_id, eos_id):
    """Padding after <eos> written as -100 (cross_entropy's ignore_index), after the loop."""
    out = good(model, src, max_len, bos_id, eos_id)
    after_eos = (out == eos_id).long().cumsum(dim=1) - (out == eos_id).long()  # (B, T_out)
    return out.masked_fill(after_eos.bool(), -100)  # <-


def pads_the_output_with_the_vocabulary_size(model, src, max_len, bos_id, eos_id):
    """Padding after <eos> written as 10, the vocabulary's size, "an id no token has"."""
    out = good(model, src, max_len, bos_id, eos_id)
    after_eos = (out == eos_id).long().cumsum(dim=1) - (out == eos_id).long()  # (B, T_out)
    return out.masked_fill(after_eos.bool(), model.tgt_vocab)  # <-


def returns_one_hot_tokens(model, src, max_len, bos_id, eos_id):
    out = good(model, src, max_len, bos_id, eos_id)
    return torch.nn.functional.one_hot(out, model.tgt_vocab)  # <- (B, T_out, V)


def appends_a_row_not_a_column(model, src, max_len, bos_id, eos_id):
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    for _ in range(max_len):
        next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)
        tokens = torch.cat([tokens, next_token[None, :]], dim=1)  # <- (1, B), not (B, 1)
    return tokens[:, 1:]


def never_chooses_eos(model, src, max_len, bos_id, eos_id):
    """Leaves the special tokens out of the argmax, <eos> among them: no sentence ends."""
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    for _ in range(max_len):
        logits = model.decode(tokens, memory, src_mask)[:, -1]  # (B, V)
        logits = logits.index_fill(-1, torch.tensor([model.pad_id, bos_id, eos_id]), -1e9)  # <-
        tokens = torch.cat([tokens, logits.argmax(dim=-1)[:, None]], dim=1)
    return tokens[:, 1:]


def returns_numpy(model, src, max_len, bos_id, eos_id):
    return good(model, src, max_len, bos_id, eos_id).numpy()  # <-


def returns_a_tuple(model, src, max_len, bos_id, eos_id):
    return tuple(good(model, src, max_len, bos_id, eos_id))  # <- one tensor per sentence


def source_through_forward(model, src, max_len, bos_id, eos_id):
    """The whole model called with the source on both sides: the decoder reads src."""
    B = src.shape[0]
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        next_token = model(src, src)[:, -1].argmax(-1)  # <-
        next_token = next_token.masked_fill(done, model.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return tokens[:, 1:]


def first_position_logits(model, src, max_len, bos_id, eos_id):
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        next_token = model.decode(tokens, memory, src_mask)[:, 0].argmax(-1)  # <-
        next_token = next_token.masked_fill(done, model.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return tokens[:, 1:]


def feeds_last_token_only(model, src, max_len, bos_id, eos_id):
    return _steps(model, src, max_len, bos_id, eos_id, fed=lambda tokens: tokens[:, -1:])  # <-


def pad_zero_everywhere(model, src, max_len, bos_id, eos_id):
    B = src.shape[0]
    src_mask = padding_mask(src, 0)  # <-
    memory = model.encode(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)
        next_token = next_token.masked_fill(done, 0)  # <-
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return tokens[:, 1:]


def src_mask_with_pad_zero(model, src, max_len, bos_id, eos_id):
    B = src.shape[0]
    src_mask = padding_mask(src, 0)  # <-
    memory = model.encode(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        next_token = model.decode(tokens, memory, src_mask)[:, -1].argmax(-1)
        next_token = next_token.masked_fill(done, model.pad_id)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
        if done.all():
            break
    return tokens[:, 1:]


WHOLE_MESSAGES = [
    (squeezes_the_output, f"❌ greedy_decode: on {CASE[2]}, the output is "
     "[3, 7, 3, 3, 3, 3, 3, 3, 2] (shape (9,)), expected [[3, 7, 3, 3, 3, 3, 3, 3, 2]] "
     "(shape (1, 9))"),
    (squeezes_the_time_axis, f"❌ greedy_decode: on {CASE[4]}, the output is [7, 3, 3] "
     "(shape (3,)), expected [[7], [3], [3]] (shape (3, 1))"),
    (item_on_the_batch, "❌ greedy_decode: on inputs model=Transformer(src_vocab=10, "
     "tgt_vocab=10, pad_id=0), src (4, 5), max_len=8, bos_id=1, eos_id=2 your code raised "
     "RuntimeError: "),
    (two_steps_too_many, f"❌ greedy_decode: on {CASE[1]}, the output has 7 tokens per "
     "sentence, more than max_len = 5: stop after max_len steps"),
    (two_steps_too_few, f"❌ greedy_decode: on {CASE[1]}, the output stops after 3 steps, "
     "but sentence 1 has not written <eos> yet: go on until every sentence has written "
     "<eos>, or for max_len = 5 steps"),
    (stop_tested_before_done_is_updated, f"❌ greedy_decode: on {CASE[0]}, the output goes "
     "on to 7 steps, but every sentence has written <eos> by step 6: stop as soon as all "
     "are done"),
    (drops_bos_after_the_first_step, f"❌ greedy_decode: on {CASE[0]}, sentence 0, step 2: "
     "your code chose token 3, but after <bos> 3 (your own tokens) the model's most likely "
     f"next token is 7. {FEED}, and the argmax over the vocabulary (dim=-1)"),
    (pads_the_output_with_ignore_index, f"❌ greedy_decode: on {CASE[0]}, the output holds "
     "token ids from -100 to 7, but the vocabulary has ids 0 .. 9: are these the argmax's "
     "indices?"),
    (pads_the_output_with_the_vocabulary_size, f"❌ greedy_decode: on {CASE[0]}, the output "
     "holds token ids from 2 to 10, but the vocabulary has ids 0 .. 9"),
    (returns_one_hot_tokens, f"❌ greedy_decode: on {CASE[0]}, the output is a tensor of "
     "shape (4, 6, 10) (shape (4, 6, 10)), expected [[3, 7, 3, 2, 0, 0], [3, 2, 0, 0, 0, 0], "
     "[3, 7, 3, 7, 3, 2], [3, 3, 2, 0, 0, 0]] (shape (4, 6))"),
    (appends_a_row_not_a_column, "❌ greedy_decode: on inputs model=Transformer(src_vocab=10, "
     "tgt_vocab=10, pad_id=0), src (4, 5), max_len=8, bos_id=1, eos_id=2 your code raised "
     "RuntimeError: Sizes of tensors must match except in dimension 1. Expected size 4 but "
     "got size 1 for tensor number 1 in the list.\n"),  # no hint: no size is the vocabulary's
    (never_chooses_eos, f"❌ greedy_decode: on {CASE[0]}, sentence 0, step 4: your code chose "
     "token 3, but after <bos> 3 7 3 (your own tokens) the model's most likely next token is "
     "2."),
    (returns_numpy, f"❌ greedy_decode: on {CASE[0]}, the output should be a (B, T_out) "
     "tensor of token ids, got a ndarray"),
    (returns_a_tuple, f"❌ greedy_decode: on {CASE[0]}, the output is a tuple: return one "
     "(B, T_out) tensor of token ids, the steps put together with torch.cat (of (B, 1) "
     "columns) or torch.stack(steps, dim=1)"),
    (first_position_logits, f"❌ greedy_decode: on {CASE[0]}, every step chooses the same "
     "token: the decoder's input does not grow with the tokens chosen (it is fed <bos> "
     "alone, or another fixed tensor), or the next token is read at the first position "
     f"(logits[:, 0], which sees only <bos>). {FEED}"),
    (source_through_forward, f"❌ greedy_decode: on {CASE[0]}, the decoder is fed the source "
     "sentence: it reads the source only through memory (the cross-attention); its input is "
     f"the target side, <bos> and the tokens chosen so far. {FEED}"),
    (feeds_last_token_only, f"❌ greedy_decode: on {CASE[0]}, the decoder is fed only the "
     f"last token chosen, so it forgets the rest of the sentence and where it is. {FEED}"),
    (pad_zero_everywhere, f"❌ greedy_decode: on {CASE[6]}, your code pads with 0 after "
     "<eos> and masks the source's 0s: padding is model.pad_id (here 3), for the src_mask "
     "and after <eos>"),
    (src_mask_with_pad_zero, f"❌ greedy_decode: on {CASE[6]}, your code builds the src_mask "
     "with pad 0: padding is model.pad_id (here 3), padding_mask(src, model.pad_id)"),
]  # fmt: skip


@pytest.mark.parametrize(
    "answer, message", WHOLE_MESSAGES, ids=[w[0].__name__ for w in WHOLE_MESSAGES]
)
def test_the_whole_message_is_printed(answer, message, verdict):
    passed, printed = verdict(check.greedy_decode, answer)
    assert passed is False and printed.startswith(message), printed


def test_the_case_descriptions_are_the_ones_the_verdicts_quote():
    """A verdict names the case by these words (the tests above quote them through CASE)."""
    assert CASE == [
        "four sentences that end with <eos> at steps 4, 2, 6 and 3, max_len = 8",
        "three sentences, one of which does not end within max_len = 5 (T_out = max_len); "
        "a non-contiguous src",
        "a batch of one, ending at step 9 of max_len = 10, with a float64 model",
        "two sentences, neither ends within max_len = 6",
        "max_len = 1",
        "sources of lengths 5, 3 and 4, padded with <pad> = 0, max_len = 8",
        "other special ids: <pad> = 3, <bos> = 5, <eos> = 4, padded sources, max_len = 7",
    ]


def test_the_cases_are_float64_and_non_contiguous_where_they_say():
    """The contract's robust inputs: one float64 model, one non-contiguous src, the
    others float32 and contiguous."""
    dtypes = [case.model().out.weight.dtype for case in _CASES]
    assert dtypes == [torch.float64 if "float64" in case.what else torch.float32
                      for case in _CASES]  # fmt: skip
    contiguous = [case.source().is_contiguous() for case in _CASES]
    assert contiguous == ["non-contiguous" not in case.what for case in _CASES]
    assert all(not m.training for m in _CASES[0].model().modules())  # eval mode, as called


def test_the_summary_counts_the_cases(verdict):
    passed, printed = verdict(check.greedy_decode, good)
    assert passed is True
    assert printed.startswith(f"✅ greedy_decode: passed ({len(_CASES)} cases: sentences "
                              "ending at different steps and some never"), printed  # fmt: skip
    assert printed.endswith("the encoder run once, without gradients).\n"), printed


def test_each_case_is_what_its_description_says():
    """A verdict names its case by these words: the numbers in them are the case's own."""
    import re

    for case in _CASES:
        (max_len,) = re.findall(r"max_len = (\d+)", case.what)
        assert int(max_len) == case.max_len, case.what
    lengths = [sum(token != 0 for token in row) for row in _CASES[5].src]
    assert "lengths 5, 3 and 4" in CASE[5] and lengths == [5, 3, 4]
    special = _CASES[6]
    assert (special.pad_id, special.bos_id, special.eos_id) == (3, 5, 4)
    assert "<pad> = 3, <bos> = 5, <eos> = 4" in CASE[6]
    assert "a batch of one" in CASE[2] and len(_CASES[2].src) == 1


def test_the_reference_decodes_each_case_to_the_tokens_the_verdicts_quote():
    """What "expected ..." shows in a verdict, case by case (the sources were chosen for the
    checker's weights: a different source word gives other tokens)."""
    from course import decoding
    from course.utils import use_threads

    with use_threads(1):
        got = [
            decoding.greedy_decode(case.model(), case.source(), *case.args()).tolist()
            for case in _CASES
        ]
    assert got == [
        [[3, 7, 3, 2, 0, 0], [3, 2, 0, 0, 0, 0], [3, 7, 3, 7, 3, 2], [3, 3, 2, 0, 0, 0]],
        [[3, 2, 0, 0, 0], [3, 4, 4, 4, 4], [3, 7, 3, 2, 0]],
        [[3, 7, 3, 3, 3, 3, 3, 3, 2]],
        [[3, 7, 3, 4, 4, 7], [3, 4, 4, 4, 4, 4]],
        [[7], [3], [3]],
        [[3, 7, 3, 2, 0, 0], [3, 7, 3, 7, 3, 2], [3, 7, 3, 2, 0, 0]],
        [[8, 9, 9, 4, 3], [8, 2, 4, 3, 3], [9, 1, 7, 2, 4]],
    ]


def samples_for_max_len_steps(model, src, max_len, bos_id, eos_id):
    """Samples each token (torch.multinomial) and always runs max_len steps: both calls give
    the same shape, different tokens."""
    B = src.shape[0]
    src_mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    tokens = torch.full((B, 1), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    for _ in range(max_len):
        probs = model.decode(tokens, memory, src_mask)[:, -1].softmax(dim=-1)
        next_token = torch.multinomial(probs, 1)[:, 0].masked_fill(done, model.pad_id)  # <-
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
        done = done | (next_token == eos_id)
    return tokens[:, 1:]


def test_sampling_is_named_when_both_calls_have_the_same_length(verdict):
    passed, printed = verdict(check.greedy_decode, samples_for_max_len_steps)
    assert passed is False
    assert printed.startswith(
        f"❌ greedy_decode: on {CASE[0]}, two calls on the same inputs gave different tokens: "
        "greedy decoding has no randomness."
    ), printed


def test_the_replay_reads_padded_sources_through_their_mask():
    """Tokens that are greedy only when the source's padding is not masked are not the
    model's choice: the replay masks the padding as the reference does."""
    from course.check.decoding import _decode, _expected, _replay
    from course.utils import use_threads

    case = _CASES[5]  # padded sources
    with use_threads(1):
        unmasked = _decode(case.model(), case.source(), *case.args(), src_mask="decode")
        reason = _replay(case, unmasked, _expected(case))
    assert reason is not None and reason.startswith("sentence "), reason
    assert "the model's most likely next token is" in reason


def test_an_answer_drawing_random_numbers_draws_the_same_on_every_check(verdict):
    """The checker seeds torch with 0 for the answer (and restores the caller's stream), so
    a sampling answer gets the same draws, and the same verdict, however the notebook was
    seeded before."""
    drawn = []

    def records_its_draws(model, src, max_len, bos_id, eos_id):
        drawn.append(torch.rand(3))
        return good(model, src, max_len, bos_id, eos_id)

    torch.manual_seed(0)
    first_draw = torch.rand(3)
    for notebook_seed in (1, 2):
        torch.manual_seed(notebook_seed)
        after = torch.rand(3)
        torch.manual_seed(notebook_seed)
        passed, _ = verdict(check.greedy_decode, records_its_draws)
        assert passed is True
        assert torch.equal(drawn[0], first_draw)  # the first call of each check: seed 0
        assert torch.equal(torch.rand(3), after)  # the notebook's stream is untouched
        drawn.clear()
