"""One package per lab (labNN): its generated lesson, exercises, topic modules, benchmark, GPU check and
declaration. What several labs use stays in the core below (lab_utils/*.py, launch/, measure/)."""
