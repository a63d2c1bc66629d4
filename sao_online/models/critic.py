"""The SAO critic: a separate copy of the policy's backbone with a zero-initialised value head."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoModel, PreTrainedModel

from sao_online.models.logprobs import position_ids_from_mask

_BACKBONE_DIR = "backbone"
_HEAD_FILE = "value_head.safetensors"
_SETTINGS_FILE = "value_model.json"
ATTENTION_PARAMETER_MARKER = "self_attn"


class ValueModel(nn.Module):
    """A per-token value estimate V(s_t) from a transformer backbone and a scalar head.

    The critic owns its backbone: build it with ``ValueModel.from_policy(policy)``, which copies
    the policy's backbone (the paper initialises the critic from the policy checkpoint), so
    training one never moves the other. The head ``nn.Linear(hidden, 1)`` starts with weight and
    bias exactly zero, so every value is exactly 0 before the first critic update.

    With ``freeze_attention=True`` (the paper's setting) every parameter whose name contains
    ``self_attn`` (query/key/value/output projections) gets ``requires_grad=False``. The paper's
    critic is a mixture-of-experts model that trains only its expert projections; the dense
    analogue kept trainable here is the MLP of each layer, plus the layer norms, the token
    embedding and the value head. Norms and embedding stay trainable because in a small dense
    model they are a large share of what can adapt, and freezing them is not what the paper
    isolates (its ablation is about attention only).

    Example:
        >>> critic = ValueModel.from_policy(policy)
        >>> values = critic(input_ids, attention_mask)   # [B, T], zeros at init
        >>> optimizer = torch.optim.AdamW(critic.trainable_parameters(), lr=5e-6)
    """

    def __init__(self, backbone: PreTrainedModel, *, freeze_attention: bool = True) -> None:
        """Wraps ``backbone`` (used as is, not copied) with a new zero-initialised head.

        Args:
            backbone: a transformer returning ``last_hidden_state`` [B, T, hidden].
            freeze_attention: freeze the parameters whose names contain ``self_attn``.

        Raises:
            ValueError: ``backbone.config`` has no ``hidden_size``.
        """
        super().__init__()
        hidden_size = getattr(backbone.config, "hidden_size", None)
        if not isinstance(hidden_size, int):
            raise ValueError("ValueModel: backbone.config has no integer hidden_size")
        self.backbone = backbone
        self.value_head = nn.Linear(hidden_size, 1, dtype=torch.float32)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)
        self.value_head.to(next(backbone.parameters()).device)
        self.freeze_attention = freeze_attention
        for name, parameter in self.backbone.named_parameters():
            frozen = freeze_attention and ATTENTION_PARAMETER_MARKER in name
            parameter.requires_grad_(not frozen)

    @classmethod
    def from_policy(cls, policy: PreTrainedModel, *, freeze_attention: bool = True) -> ValueModel:
        """A critic whose backbone is a deep copy of ``policy``'s backbone (no LM head).

        Args:
            policy: a causal LM such as the one ``build_tiny_policy`` returns.
            freeze_attention: see the class docstring.
        """
        backbone = copy.deepcopy(policy.base_model)
        backbone.train(policy.training)
        return cls(backbone, freeze_attention=freeze_attention)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Values for every position of a padded batch.

        Args:
            input_ids: [B, T] token ids.
            attention_mask: [B, T] 1 for real tokens, 0 for padding (left or right).

        Returns:
            [B, T] float32 values; padding positions hold whatever the head gives there and are
            expected to be masked by the caller.
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids_from_mask(attention_mask),
            use_cache=False,
        ).last_hidden_state
        return self.value_head(hidden.float()).squeeze(-1)

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The parameters an optimizer should update (frozen attention excluded)."""
        return [parameter for parameter in self.parameters() if parameter.requires_grad]

    def save_pretrained(self, directory: str | Path) -> None:
        """Writes the backbone (Hugging Face format), the head and the freeze setting."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(directory / _BACKBONE_DIR)
        head_state = {
            name: tensor.detach().cpu().contiguous()
            for name, tensor in self.value_head.state_dict().items()
        }
        save_file(head_state, str(directory / _HEAD_FILE))
        settings = {"freeze_attention": self.freeze_attention}
        (directory / _SETTINGS_FILE).write_text(json.dumps(settings, indent=2))

    @classmethod
    def from_pretrained(
        cls,
        directory: str | Path,
        *,
        freeze_attention: bool | None = None,
        dtype: torch.dtype | None = None,
    ) -> ValueModel:
        """Loads what ``save_pretrained`` wrote; values are identical to the saved model's.

        Args:
            directory: the directory given to ``save_pretrained``.
            freeze_attention: override the saved setting when not None.
            dtype: backbone dtype; the saved one when None.

        Raises:
            ValueError: the directory does not hold a saved ValueModel.
        """
        directory = Path(directory)
        missing = [
            name
            for name in (_BACKBONE_DIR, _HEAD_FILE, _SETTINGS_FILE)
            if not (directory / name).exists()
        ]
        if missing:
            raise ValueError(f"ValueModel.from_pretrained: {directory} lacks {missing}")
        settings = json.loads((directory / _SETTINGS_FILE).read_text())
        if freeze_attention is None:
            freeze_attention = bool(settings["freeze_attention"])
        backbone_kwargs = {} if dtype is None else {"dtype": dtype}
        backbone = AutoModel.from_pretrained(directory / _BACKBONE_DIR, **backbone_kwargs)
        critic = cls(backbone, freeze_attention=freeze_attention)
        critic.value_head.load_state_dict(load_file(str(directory / _HEAD_FILE)))
        return critic
