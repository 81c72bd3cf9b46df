"""The course's notebooks: student copies and lesson modules made from the solutions, headless runs, their datasets."""
