"""Hugging Face Hub "kernels" layers (kernels.kernelize / LayerRepository).

layers.DebertaV2Encoder replaces the forward of transformers' DebertaV2Encoder: stateless, as the
kernels package requires (its forward runs bound to the model's own encoder, which it prepares at
the first call: slot table buffer, padded layout, warn-once fallbacks). Run one forward before
torch.compile, so that the preparation is not traced.
"""

from __future__ import annotations

import torch

from .deberta import encoder_forward


class DebertaV2Encoder(torch.nn.Module):
    can_torch_compile = True
    has_backward = False  # Forward only: kernels keeps the stock forward in training mode.

    def forward(self, hidden_states, attention_mask, output_hidden_states=True,
                output_attentions=False, query_states=None, relative_pos=None, return_dict=True):
        return encoder_forward(self, hidden_states, attention_mask, output_hidden_states,
                               output_attentions, query_states, relative_pos, return_dict)
