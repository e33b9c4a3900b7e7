"""What DebertaV2Layer computes after its attention context: SelfOutput (dense, dropout, LayerNorm
of the residual sum), Intermediate (dense, activation) and Output (dense, dropout, LayerNorm of
the residual sum), by their ops called directly where that is exactly what the modules compute.

At the short sequences of classification and reranking the host bounds an eager forward, and
calling these eight modules through nn.Module costs host time comparable to the launches of
their kernels. Where each module is transformers' or torch's own class (no subclass, adapter or
quantised layer), carries no hooks (nor do global hooks exist) and its dropout is inactive, the
same ops run on the same parameters in the same order, so the result is bitwise the modules'.
Anything else calls the modules as DebertaV2Layer does.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional
from transformers.models.deberta_v2.modeling_deberta_v2 import (DebertaV2Intermediate,
                                                                DebertaV2Output,
                                                                DebertaV2SelfOutput)

from .projections import hooked


def _dropout_inactive(module: nn.Module) -> bool:
    return type(module) is nn.Dropout and (not module.training or module.p == 0)


def _activation(intermediate: nn.Module):
    """The intermediate's activation as a plain callable, or None where it must be called as a
    module (a hooked one)."""
    act = intermediate._modules.get("intermediate_act_fn")
    if act is None:
        return intermediate.__dict__.get("intermediate_act_fn")
    return None if hooked((act,)) else act.forward


def _direct_ops(self_output: nn.Module, intermediate: nn.Module, output: nn.Module):
    """The activation when the three modules may run as their ops (module docstring), else
    None."""
    if (type(self_output) is not DebertaV2SelfOutput
            or type(intermediate) is not DebertaV2Intermediate
            or type(output) is not DebertaV2Output):
        return None
    leaves = []
    for residual in (self_output, output):
        children = residual._modules
        dense, norm, dropout = children["dense"], children["LayerNorm"], children["dropout"]
        if (type(dense) is not nn.Linear or type(norm) is not nn.LayerNorm
                or not _dropout_inactive(dropout)):
            return None
        leaves += (dense, norm, dropout)
    dense = intermediate._modules["dense"]
    if type(dense) is not nn.Linear or hooked(leaves + [dense, self_output, intermediate, output]):
        return None
    return _activation(intermediate)


def _dense(linear: nn.Module, x: torch.Tensor) -> torch.Tensor:
    parameters = linear._parameters
    return functional.linear(x, parameters["weight"], parameters["bias"])


def _residual_norm(residual: nn.Module, x: torch.Tensor, input_tensor: torch.Tensor):
    """LayerNorm(dense(x) + input_tensor) of a SelfOutput / Output whose dropout is inactive."""
    children = residual._modules
    norm = children["LayerNorm"]
    parameters = norm._parameters
    summed = _dense(children["dense"], x)
    if summed.dtype == input_tensor.dtype and summed.shape == input_tensor.shape:
        summed += input_tensor  # into the fresh dense output: no allocation, the same values
    else:  # type promotion (autocast) or broadcasting, as `+` does it
        summed = summed + input_tensor
    return functional.layer_norm(summed, norm.normalized_shape, parameters["weight"],
                                 parameters["bias"], norm.eps)


def layer_tail(layer: nn.Module, context: torch.Tensor, hidden_states: torch.Tensor):
    """DebertaV2Layer's output given its attention context and input `hidden_states`."""
    modules = layer._modules
    self_output = modules["attention"]._modules["output"]
    intermediate, output = modules["intermediate"], modules["output"]
    activation = _direct_ops(self_output, intermediate, output)
    if activation is None:
        attention_output = self_output(context, hidden_states)
        return output(intermediate(attention_output), attention_output)
    attention_output = _residual_norm(self_output, context, hidden_states)
    inner = activation(_dense(intermediate._modules["dense"], attention_output))
    return _residual_norm(output, inner, attention_output)
