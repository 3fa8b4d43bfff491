"""The normalized model every format adapter produces and every view reads.

Records are frozen dataclasses (``records``); an episode's row in a run's table is ``EpisodeRow`` (``row``);
``render`` gives episodes their text and HTML faces; ``verifier`` is the verifier's recorded run
(``VerifierRecord``). The model imports nothing else of the library.
"""

from ares_viewer.model.blame import Blame
from ares_viewer.model.context_diff import ContextChange
from ares_viewer.model.errors import RecordedError, describe_error
from ares_viewer.model.records import (
    READ_IN_PART,
    STEP_COLUMNS,
    ContextLink,
    Episode,
    Message,
    Outcome,
    Step,
    StepKind,
    ToolCall,
    Usage,
    read_in_part,
)
from ares_viewer.model.row import EPISODE_COLUMNS, EXPLAINED, EpisodeRow, with_columns
from ares_viewer.model.verifier import VerifierCommand, VerifierRecord

__all__ = [
    "EPISODE_COLUMNS",
    "EXPLAINED",
    "READ_IN_PART",
    "STEP_COLUMNS",
    "Blame",
    "ContextChange",
    "ContextLink",
    "Episode",
    "EpisodeRow",
    "Message",
    "Outcome",
    "RecordedError",
    "Step",
    "StepKind",
    "ToolCall",
    "Usage",
    "VerifierCommand",
    "VerifierRecord",
    "describe_error",
    "read_in_part",
    "with_columns",
]
