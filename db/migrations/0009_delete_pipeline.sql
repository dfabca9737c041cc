-- 0005: the delete pipeline.
--
-- ops.delete_journal is the pipeline's own record of a delete (JSON of
-- core.DeleteJournal: what the delete saw when asked, the account's export
-- mode, the export it made and whether it was verified); NULL for other
-- actions. The provider delete only runs when it names a verified export
-- or says why there is none.
ALTER TABLE ops ADD COLUMN delete_journal TEXT;

-- Whether a delete needs a verified export first. Only a person's explicit
-- setting makes it 'best_effort'.
ALTER TABLE accounts ADD COLUMN delete_export TEXT NOT NULL DEFAULT 'required'
	CHECK (delete_export IN ('required', 'best_effort'));
