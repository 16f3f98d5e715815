/**
 * A job's spans in a trace it may share (docs/tracing.md): a batch's jobs share their caller's
 * trace, a workflow's jobs their workflow's. Used by `dynein show --trace` and the job browser's
 * waterfall; no Node or DOM API, so both can import it.
 */

/** The spans of `jobId`, and those about no one job (a workflow's or a batch's submit), in the order given. */
export function jobSpans<S extends { readonly attributes: Readonly<Record<string, string | number | boolean>> }>(
  spans: readonly S[],
  jobId: string,
): S[] {
  return spans.filter((s) => {
    const job = s.attributes['dynein.job_id'];
    return job === undefined || job === jobId;
  });
}
