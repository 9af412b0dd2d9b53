# Checks live answers of the status API against docs/openapi.json:
#   check_openapi.py [--partial] OPENAPI ANSWERS
# (--partial: the answers one test read; documented operations it did not
# exercise are not a problem.)
# ANSWERS: JSON lines {"method", "path", "status", "body"}. Each answer must
# be documented (path template, method, status) and its body must match
# the response schema; each documented operation must have been exercised.
import json
import re
import sys

import jsonschema

args = [a for a in sys.argv[1:] if a != "--partial"]
partial = "--partial" in sys.argv[1:]
doc = json.load(open(args[0]))
answers = [json.loads(line) for line in open(args[1]) if line.strip()]
problems = []
seen = set()


def operation(path):
    for template, ops in doc["paths"].items():
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path):
            return template, ops
    return None, None


for a in answers:
    template, ops = operation(a["path"].split("?")[0])
    method = a["method"].lower()
    where = "%s %s -> %s" % (a["method"], a["path"], a["status"])
    if ops and method not in ops and a["status"] == 405:
        # A method the path does not take: its 405 is documented on the
        # methods it takes (the answer names them in Allow).
        method = next((m for m in ops if "405" in ops[m]["responses"]), method)
    if not ops or method not in ops:
        problems.append(where + ": not documented")
        continue
    responses = ops[method]["responses"]
    r = responses.get(str(a["status"]))
    if r is None:
        problems.append(where + ": status not documented")
        continue
    seen.add((template, method))
    content = r["content"]
    if "application/json" not in content:
        continue
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "components": doc["components"]}
    schema.update(content["application/json"]["schema"])
    for e in jsonschema.Draft202012Validator(schema).iter_errors(json.loads(a["body"])):
        problems.append("%s: /%s: %s" % (where, "/".join(map(str, e.path)), e.message))

for template, ops in ({} if partial else doc["paths"]).items():
    for method in ops:
        if (template, method) not in seen:
            problems.append("%s %s: documented, never exercised" % (method.upper(), template))

for p in problems:
    print(p)
print("%d answers checked, %d problems" % (len(answers), len(problems)))
sys.exit(1 if problems else 0)
