"""Schemathesis hooks for `make fuzz` (fuzz.sh sets SCHEMATHESIS_HOOKS=fuzz_hooks, PYTHONPATH=localstack).

One hook, filter_failure, drops exactly the "schema-valid request rejected" (ST202) failures
whose cause no schema can express, and only when the server's own answer proves that cause.
Everything else is kept. Schemathesis counts what a hook dropped and prints it in its summary,
so nothing is hidden: the run says how many of these it saw.

- 400 invalid_cursor (field cursor): a cursor is an opaque token the server hands out for one
  query; a generated string, however well-formed (the schema pins base64url), is not one.
- 422 upload_not_found / upload_not_confirmed / upload_expired / account_not_connected on
  POST /v1/jobs: the body is well-formed, the ids name nothing this caller owns (API.md: 422 is
  "well-formed but unusable"). Like an unknown id in a path, which the check accepts as 404.
- 422 schedule_limit on POST /v1/schedules, 422 webhook_limit on POST /v1/webhooks: the caller
  already has the most schedules (100) or endpoints (20) allowed, which a run that creates them
  reaches; it depends on state, not on the body.
- 400 "createdTo must not be before createdFrom" on GET /v1/admin/jobs: a rule between two
  parameters; the hook checks the two times itself.
- 400 on scheduleAt more than a year ahead (field scheduleAt or job.scheduleAt): the bound is
  relative to now, which JSON Schema cannot say; the hook checks the date itself.
"""

import atexit
import collections
import datetime
import json
import sys

import schemathesis

# What the hook dropped, by reason, printed when the run ends (the evidence for each drop is in
# the server's answer the reason names).
DROPPED = collections.Counter()


@atexit.register
def _report():
    if DROPPED:
        lines = "".join(f"  {n:6d}  {reason}\n" for reason, n in DROPPED.most_common())
        sys.stderr.write("fuzz_hooks dropped these schema-valid rejections (by the server's own error):\n" + lines)


def _drop(reason):
    DROPPED[reason] += 1
    return False


STATE_422 = {"upload_not_found", "upload_not_confirmed", "upload_expired", "account_not_connected"}


def _error(response):
    try:
        err = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        return None
    return err if isinstance(err, dict) else None


def _time(value):
    if not isinstance(value, str):
        return None
    try:
        at = datetime.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def _more_than_a_year_ahead(value):
    at = _time(value)
    return at is not None and at > datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=365)


@schemathesis.hook
def filter_failure(context, failure, case, response):
    if type(failure).__name__ != "RejectedPositiveData":
        return True
    err = _error(response)
    if err is None:
        return True
    code, field = err.get("code"), err.get("field")
    where = f"{case.method} {case.operation.path}"
    if response.status_code == 400 and code == "invalid_cursor" and field == "cursor":
        return _drop(f"{where}: 400 invalid_cursor (a generated cursor)")
    if response.status_code == 422 and code in STATE_422 and case.operation.path == "/v1/jobs":
        return _drop(f"{where}: 422 {code}")
    if response.status_code == 422 and code == "schedule_limit" and case.operation.path == "/v1/schedules":
        return _drop(f"{where}: 422 schedule_limit")
    if response.status_code == 422 and code == "webhook_limit" and case.operation.path == "/v1/webhooks":
        return _drop(f"{where}: 422 webhook_limit")
    if response.status_code == 400 and field == "createdTo" and isinstance(case.query, dict):
        since, until = _time(case.query.get("createdFrom")), _time(case.query.get("createdTo"))
        if since is not None and until is not None and until < since:
            return _drop(f"{where}: 400 createdTo before createdFrom")
    if response.status_code == 400 and field in ("scheduleAt", "job.scheduleAt") and isinstance(case.body, dict):
        body = case.body.get("job") if field == "job.scheduleAt" else case.body
        if isinstance(body, dict) and _more_than_a_year_ahead(body.get("scheduleAt")):
            return _drop(f"{where}: 400 {field} more than a year ahead")
    return True
