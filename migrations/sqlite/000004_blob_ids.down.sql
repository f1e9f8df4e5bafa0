CREATE TABLE blobs_by_hash (
    artifact_id TEXT NOT NULL REFERENCES artifacts (id),
    sha256      TEXT NOT NULL,
    content     BLOB,
    PRIMARY KEY (artifact_id, sha256)
);
INSERT OR IGNORE INTO blobs_by_hash (artifact_id, sha256, content)
    SELECT artifact_id, sha256, content FROM blobs ORDER BY id;
DROP TABLE blobs;
ALTER TABLE blobs_by_hash RENAME TO blobs;

ALTER TABLE artifact_versions DROP COLUMN blob_id;
