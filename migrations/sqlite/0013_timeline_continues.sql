-- A checkpoint that continues the one before it: the same writer numbered the objects of both and
-- wrote every change between them. A moment after it can then be carried forward from a moment
-- built before it (only the objects changed since are read). A checkpoint written at a start,
-- after missed changes or on leading again does not continue (its objects are numbered afresh),
-- nor does any written before this column (FALSE, as nothing says otherwise).
ALTER TABLE timeline_checkpoints ADD COLUMN continues BOOLEAN NOT NULL DEFAULT FALSE;
