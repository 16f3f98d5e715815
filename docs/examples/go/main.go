// Command main submits a job to the Dynein HTTP API and reads its status, signing each request
// with SigV4 (aws-sdk-go-v2's v4.Signer, service "execute-api", the body's SHA-256 as payload hash).
//
// The API is docs/api.md (contract: docs/openapi.yaml).
//
// Environment:
//
//	DYNEIN_ENDPOINT  the API's base URL, e.g. https://abc123.execute-api.eu-west-1.amazonaws.com
//	                 (the local stack: "endpoint" in .dynein/local.json)
//	DYNEIN_REGION    the API's region (the local stack: "region" in local.json, default us-east-1)
//	DYNEIN_TENANT    the tenant whose routes the credentials may call
//	AWS credentials  from the SDK's default chain: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
//	                 (AWS_SESSION_TOKEN), a profile, a role... (the local stack: the tenant's keys in local.json)
//
// Run (Go 1.19 or newer; tested with Go 1.19 and aws-sdk-go-v2 1.17):
//
//	cd docs/examples/go && go mod init dynein-example && go mod tidy && go run .
//
// or, with Debian's packages (apt-get install golang-go golang-github-aws-aws-sdk-go-v2-dev) and no
// module proxy: GO111MODULE=off GOPATH=/usr/share/gocode go run main.go
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// jobReply is the reply of a submit (docs/openapi.yaml, JobReply).
type jobReply struct {
	JobID  string `json:"jobId"`
	Tenant string `json:"tenant"`
	RunAt  string `json:"runAt"`
	State  string `json:"state"`
}

// client signs and sends requests to one API endpoint.
type client struct {
	endpoint string
	region   string
	creds    aws.CredentialsProvider
	signer   *v4.Signer
	http     *http.Client
}

// call sends one signed request and returns the status and the raw JSON reply. The payload hash is
// the SHA-256 of the exact bytes sent: API Gateway checks the signature over them.
func (c *client) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint+path, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("accept", "application/json")
	if body != nil {
		req.Header.Set("content-type", "application/json")
	}
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("credentials: %w", err)
	}
	hash := sha256.Sum256(payload)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(hash[:]), "execute-api", c.region, time.Now()); err != nil {
		return 0, nil, fmt.Errorf("signing: %w", err)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	reply, err := io.ReadAll(res.Body)
	return res.StatusCode, reply, err
}

func main() {
	ctx := context.Background()
	endpoint := strings.TrimRight(mustEnv("DYNEIN_ENDPOINT"), "/")
	region := os.Getenv("DYNEIN_REGION")
	if region == "" {
		region = "us-east-1"
	}
	tenant := mustEnv("DYNEIN_TENANT")
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(region))
	if err != nil {
		log.Fatalf("AWS config: %v", err)
	}
	c := &client{endpoint: endpoint, region: region, creds: cfg.Credentials, signer: v4.NewSigner(), http: &http.Client{Timeout: 30 * time.Second}}

	jobs := "/v1/tenants/" + url.PathEscape(tenant) + "/jobs"
	job := map[string]any{"payload": map[string]any{"invoice": 42}, "delaySeconds": 60, "idempotencyKey": "example-invoice-42"}
	status, body, err := c.call(ctx, http.MethodPost, jobs, job)
	if err != nil {
		log.Fatalf("submit: %v", err)
	}
	if status != http.StatusCreated && status != http.StatusOK {
		// Errors are {"error": {"code", "message"}}, or API Gateway's {"message"}.
		log.Fatalf("submit answered %d: %s", status, body)
	}
	var submitted jobReply
	if err := json.Unmarshal(body, &submitted); err != nil {
		log.Fatalf("submit reply: %v", err)
	}
	fmt.Printf("submitted (%d): %s\n", status, body)

	status, body, err = c.call(ctx, http.MethodGet, jobs+"/"+url.PathEscape(submitted.JobID), nil)
	if err != nil {
		log.Fatalf("status: %v", err)
	}
	if status != http.StatusOK {
		log.Fatalf("status answered %d: %s", status, body)
	}
	fmt.Printf("status: %s\n", body)
}

func mustEnv(name string) string {
	v := os.Getenv(name)
	if v == "" {
		log.Fatalf("%s is not set", name)
	}
	return v
}
