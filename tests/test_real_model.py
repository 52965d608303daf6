"""The fast paths on the real default model at small size: the sweep engine against traced interventions, and
the exact derivative against a finite difference, on real task prompts."""

from __future__ import annotations

import pytest
import torch

from llmaudit.chapters.decision_tasks import TASKS, answer_ids
from llmaudit.chapters.steering_vectors import SteeringVector
from llmaudit.config import load_params
from llmaudit.data import data_dir
from llmaudit.models import load_model
from llmaudit.models.ask import ask
from llmaudit.models.request import Edit, Request

pytestmark = pytest.mark.skipif(data_dir() is None, reason="needs the data mirror (LLMAUDIT_DATA)")


@pytest.fixture(scope="module")
def setting():
    params = load_params("ci")
    model = load_model(params.name, params.model)
    task = TASKS["judicial_penalty"]
    items = task.items("neutral", 3, seed=0)
    texts = [model.chat(item.prompt, item.prefix) for item in items]
    labels = answer_ids(model.tokenizer, task.answers)
    plain = model.forward(texts, labels, layers=[20])
    generator = torch.Generator().manual_seed(0)
    direction = torch.nn.functional.normalize(torch.randn(model.width, generator=generator), dim=0)
    vector = SteeringVector("random", "race", 20, direction, plain.acts[:, 0].mean(0), k=10.0)
    return model, texts, labels, [item.target for item in items], vector


def test_engine_equals_traced_reference(bind, setting) -> None:
    model, texts, labels, _, vector = setting
    lambdas = [-1.0, 0.0, 0.6]
    engine = ask(bind(model, lambda_batch=2),
                 Request(texts=texts, labels=labels, edit=Edit(vector=vector, lambdas=lambdas))).probs
    reference = torch.stack([model.forward(texts, labels, intervention=vector.intervention(lam)).probs
                             for lam in lambdas])
    torch.testing.assert_close(engine, reference, atol=1e-4, rtol=0)


def test_exact_derivative_matches_finite_difference(setting) -> None:
    model, texts, labels, targets, vector = setting
    exact = ask(model, Request(texts=texts, labels=labels, targets=targets,
                               edit=Edit(vector=vector, lambdas=()))).derivative
    eps = 1e-3
    probs = ask(model, Request(texts=texts, labels=labels, edit=Edit(vector=vector, lambdas=[-eps, eps]))).probs
    chosen = torch.tensor(targets)
    metric = probs.gather(-1, chosen.expand(2, -1).unsqueeze(-1)).squeeze(-1) / probs.sum(-1)
    finite = (metric[1] - metric[0]) / (2 * eps)
    torch.testing.assert_close(exact, finite, atol=5e-3, rtol=5e-2)


def test_shared_prefix_equals_plain_forward_on_few_shot_prompts(setting) -> None:
    from llmaudit.chapters.markedness.metrics import LABELS
    from llmaudit.chapters.markedness.prompts import classification_prompt, demonstration_pool, demonstrations
    from llmaudit.models.passes.prefix import forward_shared_prefix

    model = setting[0]
    demos = demonstrations(demonstration_pool("sst5", data_dir()), seed=2024)
    sentences = ["The White person is a doctor.", "The person is a doctor.", "The Asian person earned money quickly.",
                 "The White person earned money quickly."]  # the two White sentences form a branch
    texts = [model.chat(*classification_prompt(text, demos)) for text in sentences]
    labels = answer_ids(model.tokenizer, LABELS)
    plain = model.forward(texts, labels, layers=[20], traced=True)
    shared = forward_shared_prefix(model.handle, texts, labels, layers=[20], batch_tokens=64)
    torch.testing.assert_close(shared.probs, plain.probs, atol=1e-4, rtol=0)
    torch.testing.assert_close(shared.acts, plain.acts, atol=1e-3, rtol=1e-4)
