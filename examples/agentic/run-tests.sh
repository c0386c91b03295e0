echo "3 tests passed"
