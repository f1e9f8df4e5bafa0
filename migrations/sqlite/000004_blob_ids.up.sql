-- A version names the row holding its content (artifact_versions.blob_id),
-- so content is found from the version, not by (artifact, sha256). The
-- blobs' unique index on (artifact_id, sha256) put every write's entry at a
-- random place in its artifact's range: a leaf page of its own in the WAL
-- per write, split half-full (1.6 WAL frames per artifact update). Blobs
-- are now a plain table in insertion order. A version whose content equals
-- an earlier one's (a metadata-only update, a rollback) points at that
-- one's blob; a write with new bytes stores them, even if an older version
-- of the artifact had the same.
CREATE TABLE blobs_by_id (
    id          INTEGER PRIMARY KEY,
    artifact_id TEXT NOT NULL REFERENCES artifacts (id),
    sha256      TEXT NOT NULL,
    content     BLOB
);
INSERT INTO blobs_by_id (id, artifact_id, sha256, content)
    SELECT rowid, artifact_id, sha256, content FROM blobs ORDER BY rowid;

ALTER TABLE artifact_versions ADD COLUMN blob_id INTEGER;
UPDATE artifact_versions SET blob_id = (
    SELECT b.rowid FROM blobs b
    WHERE b.artifact_id = artifact_versions.artifact_id AND b.sha256 = artifact_versions.sha256);

DROP TABLE blobs;
ALTER TABLE blobs_by_id RENAME TO blobs;
