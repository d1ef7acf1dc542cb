"""The library's calls, one per thing a user asks: profile or compare a target, estimate it,
analyze recordings, advise, profile a block or every rank of a job. Each takes a source's
recording through the pipeline into a report; the front ends call them."""
