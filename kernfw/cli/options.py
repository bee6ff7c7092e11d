"""The model options of the command line, generated from the estimators' parameters.

Every constructor parameter of every ``--model`` estimator is an option
``--name`` (``_`` written ``-``), typed from the estimator's
``_parameter_constraints`` (numbers, choices, booleans, None) and documented
from its numpydoc docstring, so what a user can set in Python can be set on
the command line, and a new parameter needs no change here.  The exceptions
are the parameters the command sets itself (:data:`SET_BY_THE_COMMAND`) and
those that take Python objects (:data:`PYTHON_ONLY`).
"""

import argparse
import inspect
import re
from dataclasses import dataclass, field
from numbers import Integral

from sklearn.utils._param_validation import Hidden, Interval, StrOptions

__all__ = ["ModelOption", "model_options", "SET_BY_THE_COMMAND", "PYTHON_ONLY", "parse_value"]

#: parameters the command sets itself, and the option that does it
SET_BY_THE_COMMAND = {
    "model": "the structured model, MultiClass(m) for the labels' m classes",
    "random_state": "--seed",
    "verbose": "--progress",
    "n_jobs": "--jobs (kernfw fit)",
    "warm_start": "--no-warm-start (kernfw sweep)",
}

#: parameters whose values are Python objects (feature column groups, cost matrices)
PYTHON_ONLY = {
    "groups": "lists of column index arrays",
    "cost": "a cost matrix",
}

_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


@dataclass
class ModelOption:
    """One generated option: the estimator parameter ``name`` as ``--name``.

    Attributes
    ----------
    name : str
        The estimator parameter.
    models : dict of {str: str}
        ``--model`` name -> the parameter's choices and default there, for the help.
    choices : set of str
        String values some model accepts.
    integer, real, boolean, none, array : bool
        Which other kinds of value some model accepts.
    description : str
        First sentence of the parameter's docstring entry.
    """

    name: str
    models: dict = field(default_factory=dict)
    choices: set = field(default_factory=set)
    integer: bool = False
    real: bool = False
    boolean: bool = False
    none: bool = False
    array: bool = False
    description: str = ""

    @property
    def flag(self):
        return "--" + self.name.replace("_", "-")

    def expected(self):
        """What the option takes, in words (for its errors)."""
        kinds = [f"one of {', '.join(sorted(self.choices))}"] if self.choices else []
        kinds += ["an integer"] if self.integer and not self.real else []
        kinds += ["a number"] if self.real else []
        kinds += ["true or false"] if self.boolean else []
        kinds += ["comma-separated numbers"] if self.array else []
        kinds += ["none"] if self.none else []
        return " or ".join(kinds) or "a value"

    def help(self):
        groups = {}
        for model, text in self.models.items():  # models with the same choices and default
            groups.setdefault(text, []).append(model)
        per_model = "; ".join(f"{', '.join(models)}: {text}" for text, models in groups.items())
        return f"{self.description} [{per_model}]".replace("%", "%%")


def parse_value(option, text):
    """``text`` as a value of ``option``: None, a choice, a bool, an int, a float or a list.

    Raises
    ------
    argparse.ArgumentTypeError
        Naming what the option takes.
    """
    word = text.strip()
    if option.none and word.lower() == "none":
        return None
    if word in option.choices:
        return word
    if option.boolean and word.lower() in _BOOLEANS:
        return _BOOLEANS[word.lower()]
    for ok, convert in ((option.integer, int), (option.real, float)):
        if ok:
            try:
                return convert(word)
            except ValueError:
                pass
    if option.array:
        try:
            values = [float(v) for v in word.split(",") if v.strip()]
        except ValueError:
            values = []
        if values:
            return values
    raise argparse.ArgumentTypeError(f"expected {option.expected()}, got {text!r}")


def _describe(constraints, default):
    """The choices and default of one parameter in one model, for the help."""
    choices = [sorted(c.options) for c in constraints if isinstance(c, StrOptions)]
    shown = "|".join(choices[0]) if choices else ""
    return f"{shown + ', ' if shown else ''}default {default!r}"


#: longest description of an option (its docstring's first sentence, cut at a word)
_DESCRIPTION_CHARS = 80


def _until_stop(text):
    """``text`` up to its first ". ", ": " or "; " outside parentheses and quotes (not the
    one of "i.e." or "e.g.")."""
    depth, quoted = 0, False
    for i, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif (
            char in ".:;"
            and not depth
            and not quoted
            and text[i + 1 : i + 2] in (" ", "")
            and not text[max(i - 3, 0) : i + 1].endswith(("i.e.", "e.g."))
        ):
            return text[:i]
    return text


def _first_sentence(text):
    """The first sentence of a docstring entry as plain text, at most a line long."""
    text = re.sub(r":\w+:`~?(?:[\w.]*\.)?(\w+)`", r"\1", " ".join(text.split()))  # roles
    text = text.replace("``", "")
    sentence = _until_stop(text).strip().rstrip(".")
    if len(sentence) > _DESCRIPTION_CHARS:
        sentence = sentence[:_DESCRIPTION_CHARS].rsplit(" ", 1)[0] + " …"
    return sentence


def docstring_entries(cls):
    """``{parameter: description}`` from the numpydoc "Parameters" section of ``cls``."""
    doc = inspect.getdoc(cls) or ""
    if "Parameters\n----------\n" not in doc:
        return {}
    body = doc.split("Parameters\n----------\n", 1)[1]
    body = re.split(r"\n[A-Z][a-z ]+\n-{3,}\n", body, maxsplit=1)[0]
    entries, names = {}, []
    for line in body.splitlines():
        if line and not line.startswith(" "):
            names = [n.strip() for n in line.split(" : ")[0].split(",")]
            for name in names:
                entries[name] = ""
        else:
            for name in names:
                entries[name] += " " + line.strip()
    return {k: v.strip() for k, v in entries.items()}


def _add_kinds(option, constraints):
    for c in constraints:
        if isinstance(c, Hidden):
            continue
        if isinstance(c, StrOptions):
            option.choices |= set(c.options) - set(getattr(c, "internal", ()) or ())
        elif isinstance(c, Interval):
            if c.type is Integral:
                option.integer = True
            else:
                option.real = option.integer = True
        elif c is None:
            option.none = True
        elif c == "boolean":
            option.boolean = True
        elif c == "array-like":
            option.array = True


#: the help of ``--kernel``: the command reads features, so a kernel is a name (Gram
#: matrices, "precomputed", are for Python), and the MKL models take a comma list
KERNEL_HELP = "The kernel, by name (linear, rbf, poly, sigmoid, laplacian, …)"
KERNEL_MKL_HELP = (
    "comma-separated base kernels, one kernel each, e.g. rbf,poly,linear; "
    "default None: the default family of base kernels"
)


def model_options(models):
    """``{parameter: ModelOption}`` over the estimators of ``models`` (``--model`` name ->
    :class:`~kernfw.cli.models.Model`), in the order the parameters first appear."""
    options = {}
    for model_name, model in models.items():
        cls = model.estimator_class()
        signature = inspect.signature(cls.__init__).parameters
        docs = docstring_entries(cls)
        for name, parameter in signature.items():
            if name == "self" or name in SET_BY_THE_COMMAND or name in PYTHON_ONLY:
                continue
            option = options.setdefault(name, ModelOption(name))
            constraints = cls._parameter_constraints.get(name, [])
            _add_kinds(option, constraints)
            option.models[model_name] = _describe(constraints, parameter.default)
            if name == "kernel":
                option.choices.discard("precomputed")  # no Gram matrices on the command line
                option.description = KERNEL_HELP
                if model.kind == "mkl":
                    option.models[model_name] = KERNEL_MKL_HELP
                else:
                    option.models[model_name] = f"a name, default {parameter.default!r}"
            if not option.description and docs.get(name):
                option.description = _first_sentence(docs[name])
    return options
