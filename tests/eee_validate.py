"""Every Eval Ever's own checks on a folder of records, as a script run with the package on
PYTHONPATH (it is installed beside the environment: Makefile, EEE_VALIDATOR).

Usage: eee_validate.py ROOT FILE... (paths relative to the datastore root ROOT). Prints, per
file, [valid, errors, warnings, schema errors] as JSON: the package's validator with its
repository checks, and its bundled JSON Schemas applied with jsonschema.
"""

import json
import sys
from pathlib import Path

import jsonschema
from every_eval_ever.schema import schema_json
from every_eval_ever.validator.validation_core import validate_file


def main(root: Path, files: list[str]) -> dict:
    aggregate = jsonschema.Draft7Validator(schema_json("eval.schema.json"))
    instance = jsonschema.Draft7Validator(schema_json("instance_level_eval.schema.json"))
    out = {}
    for name in files:
        path = root / name
        report = validate_file(
            path,
            repo_path=name,
            available_files=frozenset(files),
            read_repo_file=lambda p: (root / p).read_text(),
            run_semantic_checks=True,
        )
        if name.endswith(".json"):
            records = [json.loads(path.read_text())]
            validator = aggregate
        else:
            records = [json.loads(line) for line in path.read_text().splitlines()]
            validator = instance
        schema_errors = [e.message for r in records for e in validator.iter_errors(r)]
        out[name] = [report.valid, report.errors, report.warnings, schema_errors]
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2:])))
