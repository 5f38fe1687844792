"""Executors: what an act-step calls (the "model" or a tool)."""

from reynd.runtime.executors.base import Executor as Executor
from reynd.runtime.executors.base import StepFailed as StepFailed
from reynd.runtime.executors.base import validate_options as validate_options
from reynd.runtime.executors.factory import make_executor as make_executor
