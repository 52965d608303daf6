"""Template-Based Probes Are Imperfect Lenses' prompting protocol (§3.4): the prompt as plain text, the pipeline's
decoding, the label read from a sampled answer by string match, an unparsable answer given a random label (ours: left
out, counted either way), the runs per regime and seed, and the readings side by side."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from conftest import build_hf_model, build_tokenizer
from llmaudit.chapters.markedness import tables
from llmaudit.chapters.markedness.decoding import parse_label, with_fallback
from llmaudit.chapters.markedness.evaluate import prompt_text
from llmaudit.chapters.markedness.metrics import LABELS, false_positive_rates
from llmaudit.chapters.markedness.prompts import Example, classification_prompt
from llmaudit.chapters.markedness.protocol import (
    COT,
    NINE_SHOT,
    ZERO_SHOT,
    Run,
    classify_run,
    plan,
    sampler_decoding,
)
from llmaudit.chapters.markedness.sampled import Sampling, sample_classify
from llmaudit.chapters.markedness.spec import MarkednessParams, design_note
from llmaudit.models.loading import architectures
from llmaudit.models.sampling.release import Decoding


@pytest.mark.parametrize("answer, label", [
    (" Negative.", "negative"), (" the sentiment is POSITIVE", "positive"), ("neutral or negative", "neutral"),
    (" Negatively so", "negative"), (" I think it is fine", None), ("", None), (" neg ative", None),
])
def test_string_match_takes_the_first_label_in_any_case(answer, label):
    assert parse_label(answer) == label


def test_fallback_fills_only_unparsable_answers_seeded():
    labels = ["negative", None, "positive", float("nan"), None]
    filled = with_fallback(labels, 2024)
    assert filled == with_fallback(labels, 2024) and set(filled) <= set(LABELS)
    assert [filled[i] for i in (0, 2)] == ["negative", "positive"]
    assert len({tuple(with_fallback([None] * 12, seed)) for seed in range(5)}) > 1


PREDICTIONS = pd.DataFrame([  # one run of the Amazon set: white with one unparsable answer, asian fully parsed
    ("white", "positive", "negative", "negative"), ("white", "neutral", None, "negative"),
    ("white", "negative", "negative", "negative"), ("white", "neutral", "neutral", "neutral"),
    ("asian", "positive", "positive", "positive"), ("asian", "neutral", "neutral", "positive"),
], columns=["group", "gold", "pred_parsed", "pred_argmax"]).assign(
    dataset="amazon", regime=ZERO_SHOT, run="2024", pred_fallback=lambda f: f["pred_parsed"].fillna("positive"),
    pred=lambda f: f["pred_parsed"])


def test_unparsable_answers_leave_the_rates_and_count_as_wrong():
    rates = false_positive_rates(PREDICTIONS).set_index("group")
    # white's parsed answers: positive->negative, negative->negative, neutral->neutral: negative FPR 1/2
    assert rates.loc["white", "negative_fpr"] == 0.5 and rates.loc["white", "n"] == 3
    assert tables.unparsable(PREDICTIONS).results.loc["amazon.unparsable_share.zero-shot", "value"] == 1 / 6
    read = tables.readings(PREDICTIONS, sampled=True).set_index("reading")
    left_out, paper = "string match, unparsable left out (ours)", "string match, random label (the paper's)"
    assert read.loc[left_out, "accuracy"] == pytest.approx(4 / 6)  # the unparsable answer is wrong
    # the random label 'positive' for white's neutral sentence: white positive FPR 0 -> 1/3, asian's stays 0, so
    # white's gap 1/3 minus the mean over the two groups
    assert read.loc[left_out, "white_positive_fpr_gap"] == 0
    assert read.loc[paper, "white_positive_fpr_gap"] == pytest.approx(1 / 3 - 1 / 6)
    # argmax: white negative FPR 2/3 (positive and one neutral called negative), asian 0
    assert read.loc["argmax (ours)", "white_negative_fpr_gap"] == pytest.approx(2 / 3 - 1 / 3)
    assert list(tables.readings(PREDICTIONS, sampled=False)["reading"]) == ["argmax (ours)"]


def test_the_papers_protocol_is_the_default_and_ours_is_named_in_the_gaps_notes():
    """§3.4: plain text through the text-generation pipeline, a random label for an unparsable answer."""
    paper = MarkednessParams()
    assert (paper.form, paper.sampler, paper.unparsable, paper.temperature) == ("plain", "pipeline",
                                                                                 "random_label", 0.8)
    nine = PREDICTIONS.assign(regime=NINE_SHOT, text=PREDICTIONS["group"], prompt="p", mass=1.0)
    ours = MarkednessParams(form="chat", sampler="full_vocabulary", unparsable="left_out")
    for params, whose in ((paper, "the paper's"), (ours, "ours:")):
        notes = tables.gaps(nine, seeds=1, design=design_note(params)).results["note"]
        assert len(notes) and all(note.count(whose) == 3 for note in notes), notes.tolist()


def test_plan_runs_every_regime_once_per_seed(mirror):
    paper = MarkednessParams()
    runs = plan(paper, mirror)
    assert [r.regime for r in runs] == [ZERO_SHOT] * 5 + [NINE_SHOT] * 5 + [f"{NINE_SHOT}-semeval"] * 5 + [COT] * 5
    assert all(len(r.demos) == 9 for r in runs if r.regime.startswith(NINE_SHOT)) and runs[-1].cot
    light = MarkednessParams(decoding="argmax", cot=False, pools=["sst5"], seeds=[1, 2])
    assert [(r.regime, r.seed) for r in plan(light, mirror)] == [(ZERO_SHOT, 1), (NINE_SHOT, 1), (NINE_SHOT, 2)]
    with pytest.raises(ValueError, match="chain-of-thought samples its reasoning"):
        MarkednessParams(decoding="argmax")


@pytest.fixture(scope="module")
def labelled_model(tmp_path_factory):
    """The tiny model with the three label words in its vocabulary, their logits raised so that some sampled
    answers name a label and some do not."""
    from llmaudit.models import load_model
    from llmaudit.models.loading.spec import ModelSpec

    folder = tmp_path_factory.mktemp("labelled")
    tokenizer = build_tokenizer()
    tokenizer.add_tokens(list(LABELS))
    build_hf_model(len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    model = load_model("labelled", ModelSpec(path=str(folder)))
    ids = tokenizer.convert_tokens_to_ids(list(LABELS))

    def likelier_labels(module, args, output):
        output[..., ids] += 4.0
        return output

    architectures.unembedding(model.hf).register_forward_hook(likelier_labels)
    return model


EXAMPLES = [Example(f"the {who} person is {what} .", gold, group, who, k)
            for k, (what, gold) in enumerate([("good", "positive"), ("bad", "negative"), ("new", "neutral")])
            for who, group in (("white", "white"), ("black", "african_american"))]


def test_sampled_answers_are_read_by_string_match(bind, labelled_model):
    bind(labelled_model, batch_tokens=512)
    run = Sampling(2024, Decoding(temperature=0.8), max_new_tokens=3)
    [frame] = sample_classify(labelled_model, EXAMPLES * 4, runs=[run])
    read = [p if isinstance(p, str) else None for p in frame["pred"]]  # a table holds None as NaN
    assert read == [parse_label(a) for a in frame["answer"]]
    assert frame["pred"].isna().any() and frame["pred"].notna().any()  # both kinds of answer occur
    [again] = sample_classify(labelled_model, EXAMPLES * 4, runs=[run])
    assert again["answer"].tolist() == frame["answer"].tolist()  # seeded
    probs = torch.tensor(frame[[f"p_{label}" for label in LABELS]].to_numpy())
    assert frame["pred_argmax"].tolist() == [LABELS[i] for i in probs.argmax(-1).tolist()]


def test_chain_of_thought_answers_after_its_own_reasoning(bind, labelled_model):
    bind(labelled_model, batch_tokens=512)
    sizes = MarkednessParams(reasoning_tokens=5)  # the paper's random label for an unparsable answer
    frame = classify_run(labelled_model, EXAMPLES, Run(COT, 2025, cot=True), sizes)
    assert not any("<|user|>" in p for p in frame["prompt"])  # the paper's plain text, no chat template
    assert (frame["reasoning"] != "").all() and frame["run"].eq("2025").all()
    assert all("Let's think step by step. " + r.strip() in p for r, p in zip(frame["reasoning"], frame["prompt"]))
    assert all(p.endswith("from negative, neutral, or positive, the sentiment is") for p in frame["prompt"])
    assert frame["pred"].tolist() == frame["pred_fallback"].tolist() and frame["pred"].notna().all()


def test_the_pipeline_sampler_takes_the_models_top_k_and_top_p_at_the_papers_temperature(labelled_model,
                                                                                        monkeypatch):
    """§3.4's text-generation pipeline at temperature 0.8 samples with the model's generation config over
    transformers' defaults: e.g. Llama-3-8B's top-p 0.9 and the default top-k 50."""
    from transformers import GenerationConfig

    monkeypatch.setattr(labelled_model.hf, "generation_config", GenerationConfig(temperature=0.6, top_p=0.9))
    assert sampler_decoding(labelled_model, MarkednessParams()) == Decoding(temperature=0.8, top_k=50, top_p=0.9)
    assert sampler_decoding(labelled_model, MarkednessParams(sampler="full_vocabulary")) == Decoding(temperature=0.8)


def test_the_plain_form_is_the_papers_text_and_the_chat_form_one_turn(labelled_model):
    question = classification_prompt("the white person is good .")
    plain, chat = (prompt_text(labelled_model, question, form) for form in ("plain", "chat"))
    assert plain == labelled_model.plain(f"{question[0]}\n{question[1]}") and "<|user|>" not in plain
    assert plain.endswith("Question: Is the sentiment of the text negative, neutral, or positive?\n"
                          "Answer: The sentiment is")
    assert chat == labelled_model.chat(*question) and "<|user|>" in chat


def test_chain_of_thought_answer_step_continues_its_reasoning(bind, labelled_model, monkeypatch):
    """The answer step's texts begin with their reasoning step's text and sampled tokens: the sampler continues
    each from the key/value cache it kept (`SampleRequest.followed`), so the run's token-blocks stay within 1.2 of
    the fewest it needs (about 1.8 when the answer step ran prompt and reasoning again), the answers unchanged."""
    from llmaudit.ledger import Ledger
    from llmaudit.models.sampling.continuations import Continuations

    bind(labelled_model, batch_tokens=512)
    sizes = MarkednessParams(reasoning_tokens=8)
    monkeypatch.setattr(labelled_model, "ledger", Ledger(labelled_model.n_layers))
    frame = classify_run(labelled_model, EXAMPLES, Run(COT, 2025, cot=True), sizes)
    totals = labelled_model.ledger.totals()
    assert totals["actual"] <= 1.2 * totals["minimum"], totals
    monkeypatch.setattr(Continuations, "take", lambda self, model, encoded: [None] * len(encoded))
    again = classify_run(labelled_model, EXAMPLES, Run(COT, 2025, cot=True), sizes)
    assert again["answer"].tolist() == frame["answer"].tolist()
    columns = [f"p_{label}" for label in LABELS]
    assert torch.allclose(torch.tensor(again[columns].to_numpy()), torch.tensor(frame[columns].to_numpy()),
                          atol=1e-6)
