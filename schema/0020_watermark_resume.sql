-- 0020: how a harvest that is not ResourceSync goes on where it stopped
-- (#36: an OAI-PMH list's next page, its resumption token's expiry and the
-- window being harvested), as the kind that wrote it reads it; NULL when
-- nothing is under way. Written in the transaction of the batch it follows,
-- so a crash resumes at the page after the last one applied.
ALTER TABLE watermark ADD COLUMN resume text;
