"""Files: a person's attachments in, the files a run's programs make out, kept for their owner.

``names`` and ``media`` make hostile names and types safe; ``blobs`` stores bytes (a
directory, or S3); ``artifacts`` keeps files per owner and per thread; ``workspace`` is a
run's working directory for execute_code. Nothing here is imported by a run that uses no file.
"""
