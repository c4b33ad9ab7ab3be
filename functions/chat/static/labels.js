// The words the page shows for the server's stop reasons and error codes.
// tests/unit/test_page_labels.py keeps both maps in step with StopReason and ErrorCode.

export const STOP_REASONS = {
  completed: "completed",
  max_iterations: "stopped at the iteration limit",
  budget: "stopped at the token budget",
  quota: "stopped: your usage allowance ran out",
  deadline: "stopped at the time limit",
  cancelled: "cancelled",
  error: "ended with an error",
  approval_required: "waiting for your approval",
  client_tools: "waiting for the client's tools",
  suspended: "suspended until its next invocation",
};

export const ERROR_CODES = {
  configuration: "Configuration error",
  invalid_request: "Invalid request",
  provider: "Model provider error",
  invalid_output: "Answer did not match the requested format",
  internal: "Internal error",
};

export const stopReason = (reason) => STOP_REASONS[reason] || reason;
