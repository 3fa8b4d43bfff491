"""Files a run keeps beside its episodes that add to them: harbor trial results, evaluation reports' verdicts."""
