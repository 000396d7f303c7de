"""gptc's exception types, in one place (each re-exported from `gptc`).

Every refusal of the library is a GptcError whose message is one line, so that
`except gptc.GptcError` sees them all and a CLI can print it as `gptc: error: ...`.
"""


class GptcError(Exception):
    """The compiler or the runtime refused; the message is its one-line reason."""


class CaptureError(GptcError):
    """A model gptc cannot capture; the message names the op and the line."""


class GradientFlowError(GptcError):
    """A trainable parameter got no gradient, or a non-finite one."""


class ParityError(Exception):
    """A problem with the parity report's model, options or results (`gptc check
    --against-torch`): one line, exit 1. Not a GptcError: it is the CLI's own."""
