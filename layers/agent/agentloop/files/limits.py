"""Bounds on files: what a request may attach and what a run's working directory may hold.

The working directory travels to the sandbox and back with every execute_code call; deployed,
that is one Lambda invoke, whose payload is at most 6 MB each way, so the whole workspace is
kept under 4 MiB (base64 adds a third).
"""

MIB = 1024 * 1024
MAX_ATTACHMENTS = 10
MAX_ATTACHMENT_BYTES = 4 * MIB
MAX_WORKSPACE_FILES = 64
MAX_WORKSPACE_BYTES = 4 * MIB
MAX_OUTPUTS_PER_CALL = 10
OUTPUT_DIR = "output"
"""What a program writes here (new or changed) is kept and shown to the person."""
