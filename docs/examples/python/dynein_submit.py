"""Submit a job to the Dynein HTTP API and read its status, signed with SigV4 by botocore.

The API is docs/api.md (contract: docs/openapi.yaml). Requests are signed for the service
`execute-api` in the API's region, as API Gateway's IAM authorization checks them.

Environment:
  DYNEIN_ENDPOINT   the API's base URL, e.g. https://abc123.execute-api.eu-west-1.amazonaws.com
                    (the local stack: "endpoint" in .dynein/local.json)
  DYNEIN_REGION     the API's region (the local stack: "region" in local.json, default us-east-1)
  DYNEIN_TENANT     the tenant whose routes the credentials may call
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials), or
  any source of botocore's default credential chain (the local stack: the tenant's keys in local.json)

Only botocore is needed (`pip install botocore`); the HTTP call uses urllib from the standard library.

  python3 dynein_submit.py
"""

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest


def signed_call(method, url, region, credentials, body=None):
    """Sends one SigV4-signed request (service execute-api) and returns (status, parsed JSON body).

    botocore signs the path as API Gateway expects for execute-api: each segment URI-encoded once
    more than on the wire. The body is signed too (its SHA-256), so it is sent exactly as signed.
    """
    data = None if body is None else json.dumps(body).encode("utf-8")
    headers = {"accept": "application/json"}
    if data is not None:
        headers["content-type"] = "application/json"
    request = AWSRequest(method=method, url=url, data=data, headers=headers)
    SigV4Auth(credentials, "execute-api", region).add_auth(request)
    prepared = request.prepare()
    call = urllib.request.Request(prepared.url, data=data, method=method, headers=dict(prepared.headers))
    try:
        with urllib.request.urlopen(call, timeout=30) as reply:
            return reply.status, json.loads(reply.read().decode("utf-8"))
    except urllib.error.HTTPError as err:
        # Errors are JSON too: {"error": {"code", "message"}}, or API Gateway's {"message"}.
        return err.code, json.loads(err.read().decode("utf-8") or "null")


def main():
    endpoint = os.environ["DYNEIN_ENDPOINT"].rstrip("/")
    region = os.environ.get("DYNEIN_REGION", "us-east-1")
    tenant = os.environ["DYNEIN_TENANT"]
    credentials = botocore.session.get_session().get_credentials()
    if credentials is None:
        sys.exit("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")

    jobs = f"{endpoint}/v1/tenants/{urllib.parse.quote(tenant, safe='')}/jobs"
    job = {"payload": {"invoice": 42}, "delaySeconds": 60, "idempotencyKey": "example-invoice-42"}
    status, submitted = signed_call("POST", jobs, region, credentials.get_frozen_credentials(), job)
    if status not in (200, 201):
        sys.exit(f"submit answered {status}: {json.dumps(submitted)}")
    print(f"submitted ({status}): {json.dumps(submitted)}")

    job_url = f"{jobs}/{urllib.parse.quote(submitted['jobId'], safe='')}"
    status, job_status = signed_call("GET", job_url, region, credentials.get_frozen_credentials())
    if status != 200:
        sys.exit(f"status answered {status}: {json.dumps(job_status)}")
    print(f"status: {json.dumps(job_status)}")


if __name__ == "__main__":
    main()
